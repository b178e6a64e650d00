"""``execsys demo``: the triage example run end to end, explained for a newcomer.

It admits the bundled spec, runs it on the store (default: the embedded
SQLite file under ``.execsys/``), narrates the path from the journal (which
branches the planner selected, the retry, the review loop), shows a refused
and an accepted approval, and verifies the journal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from importlib import resources
from pathlib import Path
from typing import Any

from execution_system.cli._output import emit

_WIDTH = 78


def _rule(title: str) -> None:
    emit("")
    emit(f"== {title} " + "=" * max(0, _WIDTH - len(title) - 4))


def register(commands: Any) -> None:
    """Add ``execsys demo``."""
    demo = commands.add_parser("demo", help="run the demonstration workflows and explain them")
    demo.add_argument("--store", metavar="URL", help="store URL (default: the embedded SQLite)")
    demo.add_argument(
        "--triage",
        action="store_true",
        help="run the triage example (a generic graph) instead of CodeClosure",
    )
    demo.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Run the CodeClosure demo (default) or the triage example, and narrate it."""
    if not args.triage:
        from execution_system.cli._demo_closure import run_closure_demo

        return asyncio.run(run_closure_demo(args.store))
    folder = resources.files("execution_system") / "examples" / "triage"
    with resources.as_file(folder) as path:
        return asyncio.run(_demo(Path(path), args.store))


async def _demo(folder: Path, store: str | None) -> int:
    from contracts import ExecsysError, NodeId, graph_digest
    from execution_system import admit, load_document, load_graph, parse_authority
    from execution_system._compose import load_runner_config, open_runner, store_url
    from host import OPERATIONS

    spec = folder / "spec.yaml"
    graph = load_graph(spec, operations=frozenset(OPERATIONS))
    value = load_document(folder / "input.yaml")
    authority = parse_authority(load_document(folder / "authority.yaml"))
    config = load_runner_config(folder / "execsys.yaml")
    delivery = admit(
        graph,
        value,
        authority=authority,
        executors=config.executors,
        operations=frozenset(OPERATIONS),
        nonce=uuid.uuid4().hex,
    )

    emit("execution-system demo: a planner picks which checks run, a flaky check is retried,")
    emit("a reviewer sends the work round a bounded loop, and a maintainer signs off.")
    _rule("1. Admission")
    emit(f"spec      {spec.name}: graph '{graph.graph}', {len(graph.nodes)} nodes")
    emit(f"digest    {graph_digest(graph)} (identifies the graph; compiled once)")
    emit(f"input     {json.dumps(value)}")
    emit(
        "authority "
        + ", ".join(f"{a} is {'/'.join(r)}" for a, r in authority.actors.items())
        + f" (policy approved by {authority.approver})"
    )
    emit(f"delivery  {delivery.delivery_id} on {store_url(store)}")

    runner = open_runner(store)
    host = runner.host
    try:
        _rule("2. Run until the delivery needs someone")
        report = await host.run(delivery)
        _narrate(host, delivery.delivery_id)
        emit(
            f"status    {report.status.value}: '{report.wait.node if report.wait else '?'}' "
            f"waits for an {report.wait.kind if report.wait else ''} by a maintainer"
        )

        _rule("3. The approval")
        try:
            await host.resolve(
                delivery.delivery_id, NodeId("signoff"), "bob", "maintainer", {"approved": True}
            )
        except ExecsysError as refused:
            emit(f"bob tries to approve as maintainer -> refused: {refused.one_line()}")
        report = await host.resolve(
            delivery.delivery_id, NodeId("signoff"), "alice", "maintainer", {"approved": True}
        )
        emit(
            f"alice approves as maintainer -> {report.status.value} ({report.outcome}): "
            f"{report.message}"
        )

        _rule("4. The journal")
        from host.journal import verify_lines

        verdict = verify_lines(host.journal_lines(delivery.delivery_id))
        emit(f"{verdict.events} hash-chained events verified, head {verdict.head}")
        emit("")
        emit("Look closer:")
        emit(f"  .venv/bin/execsys inspect {delivery.delivery_id}")
        emit(f"  .venv/bin/execsys journal export {delivery.delivery_id} --output journal.jsonl")
        emit("  .venv/bin/execsys journal verify --file journal.jsonl")
    finally:
        runner.close()
    return 0 if report.status.value == "completed" else 1


def _narrate(host: Any, delivery: str) -> None:
    """One line per meaningful transition, read back from the journal."""
    events = [json.loads(line) for line in host.journal_lines(delivery)[1:]]
    branches: dict[tuple[str, int], list[str]] = {}
    for event in events:
        if event["transition"] == "dependencies-satisfied":
            for pred in event["predecessors"]:
                branches.setdefault((pred["node"], pred["activation"]), []).append(event["node"])
    for event in events:
        node, activation, kind = event["node"], event["activation"], event["transition"]
        label = f"{node:<9} #{activation}"
        if kind == "work-failed":
            error = event.get("error") or {}
            emit(
                f"{label}  attempt {event['attempt']['sequence']} failed: "
                f"{error.get('message', '')} ({error.get('code', '')})"
            )
        elif kind == "retry-authorized":
            emit(f"{label}  retry authorized by the node's retry policy")
        elif kind == "work-completed":
            _completed(host, label, event, branches.get((node, activation), []))
        elif kind == "work-blocked":
            emit(f"{label}  blocked: {event.get('rationale', '')}")


def _completed(host: Any, label: str, event: dict[str, Any], next_nodes: list[str]) -> None:
    refs = {ref["kind"]: ref for ref in event.get("refs", [])}
    if "selection" in refs:
        chosen = host.record(refs["selection"]["digest"])["selected"]
        emit(
            f"{label}  the planner selected {', '.join(chosen)}; only those branches run, "
            "and the barrier waits for exactly them"
        )
    elif "output" in refs:
        output = host.record(refs["output"]["digest"])
        then = f" -> {', '.join(next_nodes)}" if next_nodes else ""
        emit(f"{label}  completed with {json.dumps(output)}{then}")
    elif next_nodes:
        emit(
            f"{label}  every selected branch arrived; the barrier fires once -> "
            f"{', '.join(next_nodes)}"
        )
    else:
        emit(f"{label}  completed")
