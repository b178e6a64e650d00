"""Journal verify throughput: ``verify_lines`` against a plain reference loop.

Builds a journal of N events through the public API (a two-node loop, each
activation readied, started and completed), exports it, then times in the
same process:

* ``verify_lines`` (member-set check, canonical re-encode, digest, chain), and
* a baseline: ``json.loads`` + ``rfc8785`` re-encode + chained ``hashlib.sha256``.

Usage: ``python bench/journal_bench.py [N]`` (default 200000). No assertions.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from datetime import UTC, datetime, timedelta

import rfc8785

from contracts import AuthorityPolicy, NodeId
from contracts._journal import (
    ActivationRef,
    Actor,
    ActorKind,
    ArtifactDecl,
    AttemptRef,
    JournalHeader,
    NodeDecl,
    NodeState,
    RecordRef,
    Transition,
    format_time,
)
from host.journal import AppendCommand, Journal, authority_digest, export_lines, verify_lines
from host.journal._codec import BACKEND

EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
RUNNER = Actor(id="runner-1", kind=ActorKind.AUTOMATION)
POLICY = AuthorityPolicy(actors={"alice": ("maintainer",)}, approver="alice")


def build(n_events: int) -> Journal:
    a, b = NodeId("a"), NodeId("b")
    header = JournalHeader(
        execution="d-bench",
        authority=authority_digest(POLICY),
        graph="sha256:" + "0" * 64,
        start=a,
        nodes=(
            NodeDecl(id=a, upstream=(b,), artifacts=(ArtifactDecl(kind="port", id="x"),)),
            NodeDecl(id=b, upstream=(a,)),
        ),
        created_by=Actor(id="alice", kind=ActorKind.HUMAN),
        time=format_time(EPOCH),
    )
    journal = Journal.create(header, POLICY)
    count = 0
    prev: tuple[NodeId, int] | None = None
    activation = 0
    while count < n_events:
        activation += 1
        for node in (a, b):
            steps: list[tuple[Transition, NodeState, dict[str, object]]] = []
            if prev is not None:
                preds = (ActivationRef(node=prev[0], activation=prev[1]),)
                steps.append(
                    (Transition.DEPENDENCIES_SATISFIED, NodeState.PENDING, {"predecessors": preds})
                )
            attempt = AttemptRef(id=f"{node}-{activation}", sequence=1)
            refs = (
                (RecordRef(kind="port", id="x", digest="sha256:" + f"{count:064x}"),)
                if node == a
                else ()
            )
            steps.append((Transition.WORK_STARTED, NodeState.READY, {"attempt": attempt}))
            steps.append(
                (Transition.WORK_COMPLETED, NodeState.ACTIVE, {"attempt": attempt, "refs": refs})
            )
            for transition, prior, extra in steps:
                count += 1
                journal.append(
                    AppendCommand(
                        request=f"r{count}",
                        expected_head=journal.head,
                        node=node,
                        activation=activation,
                        expected_state=prior,
                        transition=transition,
                        actor=RUNNER,
                        at=EPOCH + timedelta(milliseconds=count),
                        rationale="step done",
                        **extra,
                    )
                )
            prev = (node, activation)
    return journal


def baseline(lines: list[bytes]) -> str:
    head = ""
    for line in lines:
        record = json.loads(line)
        body = rfc8785.dumps(record)
        head = hashlib.sha256(head.encode() + body).hexdigest()
    return head


def main() -> None:
    n_events = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    started = time.perf_counter()
    journal = build(n_events)
    built = time.perf_counter() - started
    lines = list(export_lines(journal))
    size = sum(map(len, lines))
    events = len(lines) - 1

    started = time.perf_counter()
    report = verify_lines(lines)
    verify_s = time.perf_counter() - started
    assert report.ok, report

    started = time.perf_counter()
    baseline(lines)
    base_s = time.perf_counter() - started

    print(f"journal: {events} events, {size / 1e6:.1f} MB, built in {built:.1f} s")
    print(f"{'pass':<44}{'seconds':>10}{'events/s':>14}")
    print(f"{'verify_lines (' + BACKEND + ')':<44}{verify_s:>10.3f}{events / verify_s:>14,.0f}")
    print(f"{'baseline json+rfc8785+sha256':<44}{base_s:>10.3f}{events / base_s:>14,.0f}")


if __name__ == "__main__":
    main()
