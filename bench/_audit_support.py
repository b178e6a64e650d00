"""Build a large audit bundle for ``journal_bench.py --only audit``.

A four-node review loop (``n1 -> n2 -> n3 -> n4``, ``n4`` routing back to ``n1``
or on to ``done``) admitted as a real delivery; its journal is appended through
the public ``Journal`` API with the Host's own header declarations, so the audit
re-derives everything from the admitted graph exactly as it does for a Host
export. Each completion references its output record ``{"x": k}`` (n4 also its
route port).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from contracts import AuthorityPolicy, NodeId
from contracts._canonical import digest_of
from contracts._journal import (
    ActivationRef,
    Actor,
    ActorKind,
    AttemptRef,
    JournalHeader,
    NodeState,
    RecordRef,
    Transition,
    format_time,
)
from execution_system import admit, parse_graph
from host.journal import AppendCommand, Journal, authority_digest, export_lines, node_decls

EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
HOST = Actor(id="host", kind=ActorKind.AUTOMATION)
POLICY = AuthorityPolicy(actors={"alice": ("maintainer",)}, approver="alice")
_X = {"x": {"type": "integer", "minimum": 0}}


def _graph() -> dict[str, Any]:
    node = {"kind": "action", "executor": "work", "outputs": _X}
    return {
        "spec": "execution-system/v1",
        "graph": "audit-bench",
        "start": "n1",
        "nodes": {
            "n1": {**node, "next": "n2"},
            "n2": {**node, "next": "n3"},
            "n3": {**node, "next": "n4"},
            "n4": {
                **node,
                "outputs": {**_X, "again": {"enum": ["yes", "no"]}},
                "routes": {"port": "again", "cases": {"yes": "n1", "no": "done"}},
                "max_visits": 10_000,
            },
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
    }


def build_bundle_parts(n_events: int) -> tuple[dict[str, Any], list[bytes], dict[str, Any]]:
    """``(delivery document, journal lines, records by digest)`` of about ``n_events`` events."""
    from contracts import ScriptedBinding

    graph = parse_graph(_graph())
    delivery = admit(
        graph,
        {},
        authority=POLICY,
        executors={"work": ScriptedBinding(scripted=({"status": "completed"},))},
        nonce="bench",
    )
    header = JournalHeader(
        execution=delivery.delivery_id,
        authority=authority_digest(POLICY),
        graph=delivery.graph_digest,
        start=graph.start,
        nodes=node_decls(graph),
        created_by=Actor(id="runner", kind=ActorKind.AUTOMATION),
        time=format_time(EPOCH),
    )
    journal = Journal.create(header, POLICY)
    records: dict[str, Any] = {}
    count = 0
    previous: tuple[str, int] | None = None
    rounds = max(1, n_events // 12)
    for number in range(1, rounds + 1):
        last = number == rounds
        for nid in ("n1", "n2", "n3", "n4"):
            value: dict[str, Any] = {"x": count}
            if nid == "n4":
                value["again"] = "no" if last else "yes"
            digest = digest_of(value)
            records[digest] = value
            ref = RecordRef(kind="output", id=f"{nid}#{number}", digest=digest)
            attempt = AttemptRef(id=f"{nid}#{number}.1", sequence=1)
            steps: list[tuple[Transition, NodeState, dict[str, Any]]] = []
            if previous is not None:
                preds = (ActivationRef(node=NodeId(previous[0]), activation=previous[1]),)
                steps.append(
                    (Transition.DEPENDENCIES_SATISFIED, NodeState.PENDING, {"predecessors": preds})
                )
            steps.append((Transition.WORK_STARTED, NodeState.READY, {"attempt": attempt}))
            steps.append(
                (Transition.WORK_COMPLETED, NodeState.ACTIVE, {"attempt": attempt, "refs": (ref,)})
            )
            for transition, prior, extra in steps:
                count += 1
                journal.append(
                    AppendCommand(
                        request=f"{nid}/{number}/{transition.value}",
                        expected_head=journal.head,
                        node=NodeId(nid),
                        activation=number,
                        expected_state=prior,
                        transition=transition,
                        actor=HOST,
                        at=EPOCH + timedelta(milliseconds=count),
                        **extra,
                    )
                )
            previous = (nid, number)
    lines = [line.rstrip(b"\n") for line in export_lines(journal)]
    return delivery.model_dump(mode="json"), lines, records
