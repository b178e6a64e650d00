"""Status and inspection views, derived from stored facts without LangGraph."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from contracts import DeliveryId, ErrorCode, NodeId, error
from contracts._errors import ExecsysError
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

if TYPE_CHECKING:
    from contracts import AdmittedDelivery
    from host.journal import Journal


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


@dataclass
class _Replayed:
    admitted: AdmittedDelivery
    journal: Journal


class ReplayCache:
    """Journals this process replayed for ``inspect``, by delivery, the most recent few.

    A journal only grows, so a cached replay stays right: when the store's head
    moved, only the new lines are decoded and every rule runs on them, chained
    to the cached head; when it did not, nothing is replayed. The admitted
    document is cached with it (the delivery id is its digest, so it never
    changes). Anything unexpected — a shorter journal, a refusal on the new
    lines — drops the entry and replays the whole journal, which raises the
    refusal a full replay would. ``journal verify`` and ``journal audit`` always
    read everything.
    """

    #: Deliveries whose replays are kept.
    SIZE = 16

    def __init__(self) -> None:
        self._entries: OrderedDict[str, _Replayed] = OrderedDict()
        self._lock = threading.Lock()

    def replayed(self, store: Storage, delivery: str, document: str | bytes) -> _Replayed:
        """The delivery's admitted document and its journal replayed to the stored head."""
        from contracts import AdmittedDelivery
        from host.journal import replay_lines
        from host.journal._replay import replay_tail

        head, count = store.journal_head(delivery)
        with self._lock:  # taken out while in use: two threads never extend one journal
            entry = self._entries.pop(delivery, None)
        if entry is not None and (len(entry.journal) != count or entry.journal.head != head):
            lines = store.journal_lines(delivery)
            if len(lines) - 1 < len(entry.journal):
                entry = None
            else:
                try:
                    replay_tail(entry.journal, lines[len(entry.journal) + 1 :])
                except ExecsysError:  # the full replay below raises what is wrong
                    entry = None
        if entry is None:
            admitted = AdmittedDelivery.model_validate_json(document)
            journal = replay_lines(store.journal_lines(delivery), admitted.authority)
            entry = _Replayed(admitted, journal)
        with self._lock:
            self._entries[delivery] = entry
            while len(self._entries) > self.SIZE:
                self._entries.popitem(last=False)
        return entry


def inspect_report(
    store: Storage, delivery: str, replays: ReplayCache | None = None
) -> InspectReport:
    """Status plus node states and attempts (replayed from the journal), heads and directives.

    ``interrupted`` lists every attempt the journal shows active; the caller
    keeps it only when the delivery's runner is gone. ``replays`` (optional)
    keeps replayed journals between calls of a long-lived process.
    """
    report = status_report(store, delivery)
    row = store.delivery(delivery)
    assert row is not None
    replayed = (replays or ReplayCache()).replayed(store, delivery, row["document"])
    admitted = replayed.admitted
    projection = replayed.journal.projection()
    attempts: dict[NodeId, int] = {}
    for (owner, _), view in projection.activations.items():
        attempts[owner] = attempts.get(owner, 0) + len(view.attempts)
    nodes: dict[NodeId, NodeView] = {}
    for name in admitted.graph.nodes:
        node = NodeId(name)
        nodes[node] = NodeView(
            state=projection.state(node),
            attempts=attempts.get(node, 0),
            activations=projection.current.get(node) or 0,
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
