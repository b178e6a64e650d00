"""Operator-side costs: CLI start-up without LangGraph, and suspend + resume.

1. ``execsys status`` (and the other commands that execute no graph) must not
   import LangGraph and must start in <= 0.35 s; importing LangGraph alone is
   measured in the same run as the reference.
2. In a warm runner, an action-input suspend + resume round trip through the
   Host vs raw LangGraph's interrupt()/Command(resume=...) round trip with the
   same saver and durability (target: <= 1.5x). The two sides run in alternating
   rounds (``--rounds``), so a noisy neighbour hits both alike; each round's
   ratio is printed as well as the ratio of the medians.

Run: ``.venv/bin/python bench/ops_bench.py [--quick]``. Prints tables; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TypedDict

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._raw_langgraph import AsyncSqliteSaver  # noqa: E402
from contracts import InvocationRequest, LangGraphHostConfig  # noqa: E402
from runner import RunnerFactory, parse_result  # noqa: E402
from tests.host.harness import graph_doc, make_delivery  # noqa: E402
from tests.support.memory_custody import MemoryCustody  # noqa: E402

EXECSYS = str(Path(sys.executable).with_name("execsys"))


def _median_run(argv: list[str], env: dict[str, str], reps: int) -> float:
    return _median_cost(argv, env, reps)[0]


def _median_cost(argv: list[str], env: dict[str, str], reps: int) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds (user + system) of a whole process."""
    times, cpu = [], []
    for _ in range(reps):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(argv, env=env, capture_output=True, check=False)
        times.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(times), statistics.median(cpu)


def startup(folder: Path, reps: int) -> None:
    env = {**os.environ, "EXECSYS_STORE": f"sqlite:///{folder}/state.db"}
    spec = ROOT / "examples" / "triage" / "spec.yaml"
    subprocess.run(
        [
            EXECSYS,
            "run",
            str(spec),
            "--input",
            str(ROOT / "examples" / "triage" / "input.yaml"),
            "--authority",
            str(ROOT / "examples" / "triage" / "authority.yaml"),
        ],
        env=env,
        capture_output=True,
        check=False,
    )
    listing = subprocess.run(
        [EXECSYS, "status", "--json"], env=env, capture_output=True, text=True, check=False
    )
    delivery = json.loads(listing.stdout)["deliveries"][0]["delivery"]
    probe = (
        "import sys; from execution_system.cli import main; "
        "main(sys.argv[1:]); print('LANGGRAPH', 'langgraph' in sys.modules, file=sys.stderr)"
    )
    rows = []
    for label, args in (
        ("status", ["status"]),
        ("status DELIVERY", ["status", delivery]),
        ("inspect DELIVERY", ["inspect", delivery]),
        ("journal verify DELIVERY", ["journal", "verify", delivery]),
        ("graph check SPEC", ["graph", "check", str(spec)]),
    ):
        seconds, cpu = _median_cost([EXECSYS, *args], env, reps)
        loaded = subprocess.run(
            [sys.executable, "-c", probe, *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        imported = "LANGGRAPH True" in loaded.stderr
        rows.append(
            (f"execsys {label}", f"{seconds:.3f}", f"{cpu:.3f}", "yes" if imported else "no")
        )
    reference, reference_cpu = _median_cost(
        [sys.executable, "-c", "import langgraph.graph, langgraph.checkpoint.sqlite"], env, reps
    )
    bare, bare_cpu = _median_cost([sys.executable, "-c", "pass"], env, reps)
    rows.append(
        ("python -c 'import langgraph + saver'", f"{reference:.3f}", f"{reference_cpu:.3f}", "yes")
    )
    rows.append(("python -c pass", f"{bare:.3f}", f"{bare_cpu:.3f}", "no"))
    print(f"\n1. CLI start-up (median of {reps}; target: status <= 0.35 s, no LangGraph)")
    print(f"{'command':<40} {'seconds':>8} {'cpu s':>6}  imports langgraph")
    for name, wall_s, cpu_s, uses_lg in rows:
        print(f"{name:<40} {wall_s:>8} {cpu_s:>6}  {uses_lg}")


class _S(TypedDict, total=False):
    answers: int


TURNS = 12


async def raw_round_trip(folder: Path, reps: int, tag: str = "") -> list[float]:
    """Per resume: one Command(resume=...) that finishes a turn and interrupts again."""
    from langgraph.graph import START, StateGraph
    from langgraph.types import Command, interrupt

    async def ask(state: _S) -> Any:
        interrupt("which way?")
        done = state.get("answers", 0) + 1
        return Command(update={"answers": done}, goto="ask" if done < TURNS else "__end__")

    builder: Any = StateGraph(_S)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    conn = sqlite3.connect(str(folder / "raw.db"), check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    graph = builder.compile(checkpointer=AsyncSqliteSaver(conn))
    times = []
    for i in range(reps):
        config = {"configurable": {"thread_id": f"t{tag}{i}"}}
        await graph.ainvoke({"answers": 0}, config, durability="sync")
        for _ in range(TURNS - 1):
            started = time.perf_counter()
            await graph.ainvoke(Command(resume="left"), config, durability="sync")
            times.append(time.perf_counter() - started)
    conn.close()
    return times


async def host_round_trip(folder: Path, reps: int, tag: str = "") -> list[float]:
    """Per answer: the continuation turn runs and asks again (resume + suspend)."""

    class Invoker:
        async def __call__(
            self,
            request: InvocationRequest,
            binding: Any,
            *,
            capability: str,
            workspace: str | None,
        ) -> Any:
            if request.turn < TURNS:
                return parse_result(
                    {"status": "needs-input", "question": "which way?", "session": "s"}
                )
            return parse_result({"status": "completed", "output": {"answer": "done"}})

    config = LangGraphHostConfig(engine="langgraph", store=f"sqlite:///{folder}/host.db")
    runner = RunnerFactory(config).create(custody=MemoryCustody(), invoker=Invoker())
    host: Any = runner.host
    doc = graph_doc(
        {
            "ask": {
                "kind": "action",
                "executor": "asker",
                "outputs": {"answer": {"type": "string"}},
                "next": "done",
            },
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        "ask",
    )
    times = []
    for i in range(reps):
        delivery = make_delivery(doc, nonce=f"n{tag}{i}")
        report = await host.run(delivery)
        for _ in range(TURNS - 2):
            started = time.perf_counter()
            report = await host.answer(delivery.delivery_id, report.suspension.correlation, "l")
            times.append(time.perf_counter() - started)
    runner.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--only", choices=["1", "2"], help="run one part")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of part 2")
    args = parser.parse_args()
    reps = 5 if args.quick else 15
    with tempfile.TemporaryDirectory(prefix="ops-bench-") as tmp:
        folder = Path(tmp)
        if args.only != "2":
            startup(folder, reps)
        if args.only == "1":
            return
        per = max(1, reps // args.rounds)
        raws: list[float] = []
        hosts: list[float] = []
        ratios: list[float] = []
        for n in range(args.rounds):
            raw_times = asyncio.run(raw_round_trip(folder, per, f"r{n}-"))
            host_times = asyncio.run(host_round_trip(folder, per, f"r{n}-"))
            ratios.append(statistics.median(host_times) / statistics.median(raw_times))
            raws += raw_times
            hosts += host_times
        raw, host = statistics.median(raws), statistics.median(hosts)
    print(
        f"\n2. One resume + the next suspension, warm runner (median over {per * args.rounds} "
        f"episodes of {TURNS} turns, {args.rounds} alternating rounds)"
    )
    print(f"{'':<52} {'ms':>8} {'x raw':>7}")
    print(
        f"{'raw LangGraph: Command(resume) -> next interrupt()':<52} {raw * 1000:>8.2f} {1:>7.2f}"
    )
    print(
        f"{'Host: answer() -> continuation turn -> next question':<52} {host * 1000:>8.2f} "
        f"{host / raw:>7.2f}"
    )
    print("  the Host's figure includes taking and releasing the delivery's lease, the")
    print("  correlation check against committed state, and the journal's events;")
    print("  per-round ratios: " + ", ".join(f"{r:.2f}" for r in ratios))
    print(f"  target <= 1.5x raw: {'met' if host / raw <= 1.5 else 'MISSED'}")


if __name__ == "__main__":
    main()
