"""Journal benchmarks: verify throughput, and what the journal adds to a Host step.

**verify.** Builds a journal of N events through the public API (a two-node
loop, each activation readied, started and completed), exports it, then times
in the same process:

* ``verify_lines`` (the event-line template, or member set and canonical
  re-encode for a line outside it; digest; chain), and
* a baseline: ``json.loads`` + ``rfc8785`` re-encode + chained ``hashlib.sha256``.

**append.** Runs the Host's trivial-action loop (``bench/host_bench.py``
measurement 1: same SQLite pragmas and durability) and measures the journal
two ways in the same process:

* *Inside the step*: every ``JournalBook.append`` the saver makes is timed:
  the step's three events (dependencies-satisfied, work-started,
  work-completed) turned into request content, checked against the rules,
  digested, encoded and inserted with the checkpoint's cursor. Printed as a
  share of the step and as what it adds to the rest of the step.
* *A/B*: every rep runs the loop once with the journal on and once with it
  switched off (``JournalBook.append`` replaced by a no-op that checks and
  writes nothing), in alternating order. This also counts what the timer
  cannot see: the journal rows' part of the commit (same fsync, more pages)
  and the journal's effect on the rest of the step (caches, allocation). The
  target (the journal adds at most 10% to a Host step) is judged here.

Both run with in-memory custody (the cheapest step, so the journal's largest
share) and with the default FileCustody on an empty workspace
(``--custody mem,file``). ``--floor`` adds a third arm: the journal with its
rules and replay state stubbed out, i.e. only the work any hash-chained,
stored journal must do (request content, two canonical dumps, two SHA-256s,
the line, the row in the commit). ``--bare`` adds one more: no journal and no
drafts either, which prices the drafts the handlers build and the outbox
carries through each checkpoint before the append sees them.

**audit.** Builds a bundle of ``--audit-events`` events (default 100,000) from a
four-node loop admitted as a real delivery (``bench/_audit_support.py``), once
with its records and once with digests only, and times ``audit_bundle`` on
each, beside the bundle framing alone, ``verify_lines`` on its journal and the
floor. Targets: >= 50,000 events/s with records, >= 150,000 without.

The verify pass also prints the floor: SHA-256 plus one ``orjson.loads`` per
line, the least any verifier of this format must do (target for verify:
>= 300,000 events/s). Every timed pass is the best of three runs.

Each verify and audit pass prints wall and process-CPU rates (on a shared
machine the CPU figure is the steadier one); ``--before REV`` also times the
same export and bundles with the code of git revision REV and with this tree,
in alternating child processes, for before/after figures from one run.

Usage: ``python bench/journal_bench.py [N] [--only verify,append,audit] [--custody mem,file]
[--before REV]`` (default N 200000). No assertions: the target is printed as met / MISSED.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import rfc8785

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contracts import (
    AuthorityPolicy,
    ExecutorBinding,
    InvocationRequest,
    InvocationResult,
    LangGraphHostConfig,
    NodeId,
)
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
from host.journal import (
    AppendCommand,
    Journal,
    authority_digest,
    export_lines,
    verify_lines,
)
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


def floor(lines: list[bytes]) -> None:
    """The physical floor of any verifier: SHA-256 and one JSON parse per line."""
    sha256, loads = hashlib.sha256, orjson.loads
    for line in lines:
        sha256(line).digest()
        loads(line)


def _best(fn: Callable[[], object], reps: int = 3) -> float:
    """Least wall time of ``reps`` runs (on a shared machine, the least disturbed one)."""
    return _best_both(fn, reps)[0]


def _best_both(fn: Callable[[], object], reps: int = 3) -> tuple[float, float]:
    """Least wall time and least process CPU time of ``reps`` runs."""
    walls, cpus = [], []
    for _ in range(reps):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus)


def bench_verify(n_events: int, before: str | None = None) -> None:
    started = time.perf_counter()
    journal = build(n_events)
    built = time.perf_counter() - started
    lines = list(export_lines(journal))
    size = sum(map(len, lines))
    events = len(lines) - 1

    assert verify_lines(lines).ok
    # Alternate the two passes so that the machine's load hits both alike.
    verify_s, verify_cpu, floor_s, floor_cpu = 1e9, 1e9, 1e9, 1e9
    for _ in range(3):
        wall, cpu = _best_both(lambda: verify_lines(lines), 1)
        verify_s, verify_cpu = min(verify_s, wall), min(verify_cpu, cpu)
        wall, cpu = _best_both(lambda: floor(lines), 1)
        floor_s, floor_cpu = min(floor_s, wall), min(floor_cpu, cpu)

    started = time.perf_counter()
    baseline(lines)
    base_s = time.perf_counter() - started

    print(f"journal: {events} events, {size / 1e6:.1f} MB, built in {built:.1f} s")
    print(f"  append rate while building (public API): {events / built:,.0f} events/s")
    print(f"{'pass':<44}{'seconds':>10}{'events/s':>14}{'CPU ev/s':>14}")
    label = f"verify_lines ({BACKEND})"
    print(f"{label:<44}{verify_s:>10.3f}{events / verify_s:>14,.0f}{events / verify_cpu:>14,.0f}")
    print(f"{'baseline json+rfc8785+sha256':<44}{base_s:>10.3f}{events / base_s:>14,.0f}")
    label = "floor sha256+orjson.loads"
    print(f"{label:<44}{floor_s:>10.3f}{events / floor_s:>14,.0f}{events / floor_cpu:>14,.0f}")
    rate = events / verify_s
    print(f"  verify / floor: {floor_s / verify_s:.2f} (wall), {floor_cpu / verify_cpu:.2f} (CPU)")
    print(f"  verify target >= 300,000 events/s: {'met' if rate >= 300_000 else 'MISSED'}")
    if before is not None:
        from _journal_compare import before_after

        print(f"{'before/after (child processes)':<58}{'events/s':>14}{'CPU ev/s':>14}")
        before_after("verify", b"".join(lines), before, events)


# --- audit: a 100,000-event bundle ------------------------------------------------------------


def bench_audit(n_events: int, before: str | None = None) -> None:
    from _audit_support import build_bundle_parts
    from _journal_compare import before_after

    from host.journal import audit_bundle, encode_bundle, parse_bundle

    started = time.perf_counter()
    document, lines, records = build_bundle_parts(n_events)
    full = encode_bundle(document, lines, records.__getitem__)
    digests = encode_bundle(document, lines, None)
    built = time.perf_counter() - started
    events = len(lines) - 1
    assert audit_bundle(full).ok
    assert audit_bundle(digests).ok
    print(f"audit bundle: {events} events, {len(records)} records, built in {built:.1f} s")
    print(f"  {len(full) / 1e6:.1f} MB with records, {len(digests) / 1e6:.1f} MB digests only")
    print(f"{'pass':<44}{'seconds':>10}{'events/s':>14}{'CPU ev/s':>14}")
    arms = [
        ("audit, records included", lambda: audit_bundle(full), 50_000),
        ("audit, digests only", lambda: audit_bundle(digests), 150_000),
        ("  of which: bundle framing + digest", lambda: parse_bundle(full), None),
        ("  of which: verify_lines (chain)", lambda: verify_lines(lines), None),
        ("floor sha256+orjson.loads", lambda: floor(lines), None),
    ]
    for label, fn, target in arms:
        seconds, cpu = _best_both(fn)
        rate = events / seconds
        verdict = "" if target is None else ("  met" if rate >= target else "  MISSED")
        print(f"{label:<44}{seconds:>10.3f}{rate:>14,.0f}{events / cpu:>14,.0f}{verdict}")
    if before is not None:
        print(f"{'before/after (child processes)':<58}{'events/s':>14}{'CPU ev/s':>14}")
        before_after("audit", full, before, events)
        print("  (records included above; digests only below)")
        before_after("audit", digests, before, events)


# --- append: the journal's share of a Host step ---------------------------------------------


class _Invoker:
    """Answers every invocation with ``reply(request)`` (the harness's scripted binding)."""

    def __init__(self, reply: Callable[[InvocationRequest], dict[str, Any]]) -> None:
        self.reply = reply

    async def __call__(
        self,
        request: InvocationRequest,
        binding: ExecutorBinding,
        *,
        capability: str,
        workspace: str | None,
    ) -> InvocationResult:
        from runner import parse_result

        return parse_result({"status": "completed", "output": self.reply(request)})


@contextmanager
def _floor() -> Iterator[None]:
    """The journal minus its rules: check_event does nothing, apply only moves the head.

    What is left is the work no journal design can skip: each event's request
    content, two canonical dumps, two SHA-256s, its line, and its row in the
    commit. A measuring device only; the Host never runs like this.
    """
    import importlib

    from host.journal._state import ReplayState

    journal_module: Any = importlib.import_module("host.journal._journal")
    state_class: Any = ReplayState

    def apply(state: Any, event: dict[str, Any], digest: Any) -> None:
        state.head, state.count = digest, event["ordinal"]

    saved = journal_module.check_event, state_class.apply
    journal_module.check_event = lambda state, event: None
    state_class.apply = apply
    try:
        yield
    finally:
        journal_module.check_event, state_class.apply = saved


@contextmanager
def _bare() -> Iterator[None]:
    """No journal at all: the handlers queue no drafts (and the append is off).

    Measures what the step's drafts cost before the append sees them: building
    them in the handlers and carrying them through the outbox channel, which is
    part of each checkpoint. A measuring device only.
    """
    import importlib

    context: Any = importlib.import_module("host._context")
    saved = context.StepWriter.event
    context.StepWriter.event = lambda writer, *args, **kwargs: None
    try:
        yield
    finally:
        context.StepWriter.event = saved


class _AppendTimer:
    """Wraps one JournalBook's ``append``: wall and thread-CPU seconds, calls, events."""

    def __init__(self, book: Any) -> None:
        self.book = book
        self.inner = book.append
        self.enabled = True
        self.reset()
        book.append = self

    def reset(self) -> None:
        self.wall = self.cpu = 0.0
        self.calls = self.events = 0

    def __call__(self, cur: Any, delivery_id: str, drafts: list[dict[str, Any]]) -> Any:
        if not self.enabled:
            # The journal switched off (the A/B's other arm): nothing is checked,
            # digested or written; the saver gets the journal as it was.
            return self.book.journal(delivery_id, cur)
        c0, w0 = time.thread_time(), time.perf_counter()
        journal = self.inner(cur, delivery_id, drafts)
        self.wall += time.perf_counter() - w0
        self.cpu += time.thread_time() - c0
        self.calls += 1
        self.events += sum(1 for d in drafts if d.get("type") == "event")
        return journal


def bench_append(
    steps: int,
    reps: int,
    custody_kind: str = "mem",
    with_floor: bool = False,
    with_bare: bool = False,
) -> float:
    """Median percentage the journal's appends add to the rest of a Host step (wall).

    ``custody_kind`` is ``mem`` (in-memory custody: the cheapest step, so the
    journal's largest share) or ``file`` (the default FileCustody on an empty
    workspace).
    """
    from execution_system.custody import FileCustody
    from runner import RunnerFactory
    from tests.host.harness import graph_doc, make_delivery
    from tests.support.memory_custody import MemoryCustody

    doc = graph_doc(
        {
            "step": {
                "kind": "action",
                "executor": "step",
                "outputs": {"go": {"enum": ["again", "stop"]}},
                "routes": {"port": "go", "cases": {"again": "step", "stop": "done"}},
                "max_visits": steps + 1,
            },
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        "step",
    )
    folder = Path(tempfile.mkdtemp(prefix="journal-bench-"))
    config = LangGraphHostConfig(engine="langgraph", store=f"sqlite:///{folder / 'state.db'}")
    invoker = _Invoker(lambda req: {"go": "again" if req.activation < steps else "stop"})
    custody: Any = FileCustody(folder / "custody") if custody_kind == "file" else MemoryCustody()
    runner = RunnerFactory(config).create(custody=custody, invoker=invoker)
    host: Any = runner.host
    timer = _AppendTimer(host.journals)
    rows: list[tuple[float, float, float, float, float]] = []

    async def run(nonce: str) -> None:
        report = await host.run(make_delivery(doc, nonce=nonce))
        if report.status != "completed":
            raise RuntimeError(f"delivery ended {report.status}")

    # The A/B's other arms: name -> (context, whether the append runs).
    extra: dict[str, tuple[Callable[[], Any], bool]] = {}
    if with_floor:
        extra["floor"] = (_floor, True)
    if with_bare:
        extra["bare"] = (_bare, False)
    # (wall, CPU) ms/step of the arms other than "on", rep by rep.
    off: list[tuple[float, float]] = []
    others: dict[str, list[tuple[float, float]]] = {name: [] for name in extra}

    async def timed(nonce: str) -> tuple[float, float]:
        c0, w0 = time.process_time(), time.perf_counter()
        await run(nonce)
        return time.perf_counter() - w0, time.process_time() - c0

    async def all_runs() -> None:
        await run("warm-up")  # compile, imports, first-use caches
        for rep in range(reps):
            # A/B: each rep runs the loop with the journal on and with it off (and
            # any extra arm), in alternating order so drift hits every arm alike.
            arms = ["on", "off", *extra]
            for arm in arms if rep % 2 == 0 else arms[::-1]:
                timer.reset()
                timer.enabled = arm != "off"
                if arm in extra:
                    context, timer.enabled = extra[arm]
                    with context():
                        wall, cpu = await timed(f"rep-{rep}-{arm}")
                    others[arm].append((wall * 1000 / steps, cpu * 1000 / steps))
                    continue
                wall, cpu = await timed(f"rep-{rep}-{arm}")
                if arm == "off":
                    off.append((wall * 1000 / steps, cpu * 1000 / steps))
                    continue
                rows.append(
                    (
                        wall * 1000 / steps,
                        cpu * 1000 / steps,
                        timer.wall * 1000 / steps,
                        timer.cpu * 1000 / steps,
                        timer.events / steps,
                    )
                )
        timer.enabled = True

    asyncio.run(all_runs())
    runner.close()
    host_wall, host_cpu, j_wall, j_cpu, per_step = (
        statistics.median(col) for col in zip(*rows, strict=True)
    )
    off_wall, off_cpu = (statistics.median(col) for col in zip(*off, strict=True))

    def added(arm: list[tuple[float, float]], column: int) -> float:
        """Median over reps of (arm - off) / off, in %: wall (0) or CPU (1)."""
        pairs = zip(arm, off, strict=True)
        return statistics.median((a[column] - o[column]) / o[column] for a, o in pairs) * 100

    on_arm = [(r[0], r[1]) for r in rows]
    ab_wall, ab_cpu = added(on_arm, 0), added(on_arm, 1)
    share_wall = statistics.median(r[2] / r[0] for r in rows) * 100
    share_cpu = statistics.median(r[3] / r[1] for r in rows) * 100
    # "Adds X% to a step": the appends against the rest of the step (without them).
    added_wall = statistics.median(r[2] / (r[0] - r[2]) for r in rows) * 100
    added_cpu = statistics.median(r[3] / (r[1] - r[3]) for r in rows) * 100
    label = "FileCustody" if custody_kind == "file" else "in-memory custody"
    print(
        f"\nappend, {label}: the journal's share of a Host step ({steps} steps, "
        f"median of {reps} runs, {per_step:.2f} events/step)"
    )
    print(f"{'':<42}{'wall ms/step':>14}{'CPU ms/step':>14}")
    print(f"{f'Host step ({label})':<42}{host_wall:>14.3f}{host_cpu:>14.3f}")
    print(f"{'journal appends (JournalBook.append)':<42}{j_wall:>14.3f}{j_cpu:>14.3f}")
    print(f"{'  per event':<42}{j_wall / per_step:>14.3f}{j_cpu / per_step:>14.3f}")
    print(f"{'  share of the Host step':<42}{share_wall:>13.1f}%{share_cpu:>13.1f}%")
    print(f"{'  added to the rest of the step':<42}{added_wall:>13.1f}%{added_cpu:>13.1f}%")
    print(f"{'Host step, journal switched off (A/B)':<42}{off_wall:>14.3f}{off_cpu:>14.3f}")
    print(f"{'  journal on vs off: added (A/B)':<42}{ab_wall:>13.1f}%{ab_cpu:>13.1f}%")
    labels = {
        "floor": ("Host step, journal without its rules", "  floor (dumps, digests, rows) vs off"),
        "bare": ("Host step, no journal and no drafts", "  bare vs off (negative: drafts' cost)"),
    }
    for name, arm in others.items():
        arm_wall, arm_cpu = (statistics.median(col) for col in zip(*arm, strict=True))
        print(f"{labels[name][0]:<42}{arm_wall:>14.3f}{arm_cpu:>14.3f}")
        print(f"{labels[name][1]:<42}{added(arm, 0):>13.1f}%{added(arm, 1):>13.1f}%")
    if "bare" in others:
        whole = [
            ((r[0] - b[0]) / b[0], (r[1] - b[1]) / b[1])
            for r, b in zip(rows, others["bare"], strict=True)
        ]
        whole_wall, whole_cpu = (statistics.median(col) * 100 for col in zip(*whole, strict=True))
        print(f"{'  journal with its drafts vs bare':<42}{whole_wall:>13.1f}%{whole_cpu:>13.1f}%")
    for name, value in (("wall", ab_wall), ("CPU", ab_cpu)):
        verdict = "met" if value <= 10 else "MISSED"
        print(
            f"  target: the journal adds <= 10% to a Host step (A/B, {name}): "
            f"{value:.1f}% -> {verdict}"
        )
    print("  CPU: process CPU per step (fsync waits excluded; the journal adds no fsync).")
    print("  Timed appends: the append's own thread time against the process's CPU per step.")
    return ab_wall


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("events", nargs="?", type=int, default=200_000, help="verify: N events")
    parser.add_argument("--only", default="verify,append,audit", help="verify,append,audit")
    parser.add_argument(
        "--audit-events", type=int, default=100_000, help="audit: events in the bundle"
    )
    parser.add_argument("--steps", type=int, default=200, help="append: Host steps per run")
    parser.add_argument("--reps", type=int, default=15, help="append: runs per arm (median)")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="append: add an arm, the journal without its rules (the cost floor)",
    )
    parser.add_argument(
        "--bare",
        action="store_true",
        help="append: add an arm with no journal and no drafts (what the drafts cost)",
    )
    parser.add_argument(
        "--custody",
        default="mem,file",
        help="append: mem (in-memory custody, the target's case), file (FileCustody)",
    )
    parser.add_argument(
        "--before",
        default=None,
        help="verify, audit: also time a git revision (e.g. main) and this tree, each in "
        "alternating child processes on the same data",
    )
    args = parser.parse_args(argv)
    only = {part.strip() for part in args.only.split(",")}
    if "verify" in only:
        bench_verify(args.events, args.before)
    if "audit" in only:
        bench_audit(args.audit_events, args.before)
    if "append" in only:
        for kind in (part.strip() for part in args.custody.split(",")):
            bench_append(args.steps, args.reps, kind, args.floor, args.bare)


if __name__ == "__main__":
    main()
