"""Status and inspection views, derived from stored facts without LangGraph."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from contracts import DeliveryId, ErrorCode, NodeId, error
from contracts._status import DeliveryStatus, StatusReport, SuspensionView, WaitView
from host._reports import (
    ActiveAttempt,
    CustodyHeads,
    DeliverySummary,
    InspectReport,
    JournalHead,
    NodeView,
    PendingWait,
)
from host.storage import ListedDelivery, Storage


def derive_status(values: dict[str, Any], more: bool) -> tuple[str, str | None, dict[str, Any]]:
    """Status, outcome and detail of a delivery from a checkpoint's channel values.

    ``more`` says whether the step scheduled further work. A running delivery
    with nothing scheduled is suspended (an action asked a question), waiting
    (a workflow wait), or stalled — which only a directive can resolve.
    """
    run = values.get("run") or {}
    status = str(run.get("status") or "running")
    outcome = run.get("outcome") or None
    suspensions = values.get("suspensions") or {}
    waits = values.get("waits") or {}
    detail: dict[str, Any] = {
        "message": run.get("message", ""),
        "suspensions": [
            {"correlation": s["correlation"], "node": node, "question": s.get("question")}
            for node, s in sorted(suspensions.items())
        ],
        "waits": [
            {
                "node": node,
                "kind": w["kind"],
                "approvals": len(w.get("approvals", [])),
                "needed": w.get("needed", 1),
                "roles": w.get("roles", []),
            }
            for node, w in sorted(waits.items())
        ],
        "savepoint": (values.get("savepoint") or {}).get("head"),
    }
    if status == "running" and not more:
        if waits:
            status = "waiting"
        elif suspensions:
            status = "suspended"
        else:
            status = "intervention"
            outcome = ErrorCode.INTERVENTION_REQUIRED.value
            detail["message"] = "no runnable work remains and no terminal was reached"
    return status, outcome, detail


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def status_report(store: Storage, delivery: str) -> StatusReport:
    """The status report of one delivery."""
    row = store.delivery(delivery)
    if row is None:
        raise error(
            ErrorCode.DELIVERY_NOT_FOUND,
            "no such delivery",
            path=delivery,
            expected="a delivery id listed by 'execsys status'",
        )
    detail = row["detail"]
    suspensions = tuple(SuspensionView(**s) for s in detail.get("suspensions", []))
    waits = detail.get("waits", [])
    return StatusReport(
        delivery=row["delivery"],
        graph=row["graph"],
        status=DeliveryStatus(row["status"]),
        outcome=row["outcome"],
        suspension=suspensions[0] if suspensions else None,
        suspensions=suspensions,
        wait=WaitView(node=waits[0]["node"], kind=waits[0]["kind"]) if waits else None,
        message=detail.get("message", ""),
        updated=_iso(row["updated"]),
    )


def summary(row: ListedDelivery) -> DeliverySummary:
    """A listing row of the store as the Host reports it."""
    return DeliverySummary(
        delivery=DeliveryId(row["delivery"]),
        graph=row["graph"],
        status=DeliveryStatus(row["status"]),
        outcome=row["outcome"],
        updated=_iso(row["updated"]),
        changed=row["updated"],
    )


def list_report(store: Storage) -> list[DeliverySummary]:
    """``status --json`` without a delivery."""
    return [summary(row) for row in store.deliveries()]


_DIRECTIVES: dict[str, list[str]] = {
    "queued": ["stop", "cancel"],
    "running": ["stop"],
    "suspended": ["input", "stop"],
    "waiting": ["resolve", "stop"],
    "intervention": ["recover continue", "recover restart-from-savepoint", "recover intervene"],
    "stopped": ["recover continue", "recover restart-from-savepoint", "retire"],
    "completed": ["retire"],
    "failed": ["retire"],
    "cancelled": ["retire"],
    "retired": [],
}


def inspect_report(store: Storage, delivery: str) -> InspectReport:
    """Status plus node states and attempts (replayed from the journal), heads and directives.

    ``interrupted`` lists every attempt the journal shows active; the caller
    keeps it only when the delivery's runner is gone.
    """
    from contracts import AdmittedDelivery
    from host.journal import replay_lines

    report = status_report(store, delivery)
    row = store.delivery(delivery)
    assert row is not None
    admitted = AdmittedDelivery.model_validate_json(row["document"])
    journal = replay_lines(store.journal_lines(delivery), admitted.authority)
    projection = journal.projection()
    nodes: dict[NodeId, NodeView] = {}
    for name in admitted.graph.nodes:
        node = NodeId(name)
        views = [v for (n, _), v in projection.activations.items() if n == node]
        latest = projection.current.get(node)
        nodes[node] = NodeView(
            state=projection.state(node),
            attempts=sum(len(v.attempts) for v in views),
            activations=latest or 0,
        )
    active = tuple(
        ActiveAttempt(node=node, activation=number, attempt=len(view.attempts))
        for (node, number), view in sorted(projection.activations.items())
        if view.state.value == "active"
    )
    detail = row["detail"]
    return InspectReport(
        delivery=report.delivery,
        status=report.status,
        outcome=report.outcome,
        suspension=report.suspension,
        wait=report.wait,
        message=report.message,
        graph=report.graph,
        updated=report.updated,
        suspensions=report.suspensions,
        waits=tuple(PendingWait(**w) for w in detail.get("waits", [])),
        nodes=nodes,
        journal=JournalHead(head=projection.head, events=projection.events),
        custody=CustodyHeads(savepoint=detail.get("savepoint")),
        checkpoint=row["checkpoint"],
        directives=tuple(_DIRECTIVES.get(report.status.value, [])),
        interrupted=active,
    )


#: What an operator can do for a delivery left ``running`` by a runner that is gone.
ORPHANED_DIRECTIVES = ("recover continue", "recover restart-from-savepoint", "stop")
