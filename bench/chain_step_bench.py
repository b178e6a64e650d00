"""Where a late step of a long chain costs more than an early one, in one process.

One delivery of a chain of ``--nodes`` trivial actions (``FileCustody`` on an
empty workspace, the Host of ``host_bench.py``), three figures:

1. **CPU per step** (``time.process_time``, all threads) over the first and
   the last tenth of the steps.
2. **Garbage collection** inside each of those tenths: the collections by
   generation and the CPU they took (``gc.callbacks``). A full collection
   walks every tracked object of the process, so where one lands moves a
   tenth's mean by a millisecond or more.
3. **Checkpoint delta encoding** (copy + diff) on the real checkpoints at an
   early and a late step, timed both ways in this process: as the code before
   decision 0125 did it (a private copy, every map walked) and as now.
4. **Raw LangGraph** on the same chain (stock ``SqliteSaver``), with static
   edges and with ``Command(goto=...)`` routing: its own growth with length.

Usage: ``.venv/bin/python bench/chain_step_bench.py [--nodes 1000] [--gc-off]``
(``--gc-off``: the delivery runs with the collector disabled). No assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _host_support import HostUnderTest, graph_doc

import host.langgraph._delta as delta
from execution_system.custody import FileCustody


def raw_chain(n: int, goto: bool) -> tuple[float, float]:
    """Mean CPU ms per step of raw LangGraph over the first and last tenth of an n-node chain.

    Stock ``SqliteSaver`` (WAL, ``synchronous=FULL``, ``durability="sync"``); with
    ``goto`` each node routes by ``Command(goto=...)`` as the Host's do, else by
    static edges.
    """
    import sqlite3
    from typing import TypedDict

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command

    class State(TypedDict, total=False):
        n: int

    folder = Path(tempfile.mkdtemp(prefix="raw-chain-"))
    conn = sqlite3.connect(folder / "raw.db", check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    saver = SqliteSaver(conn)
    saver.setup()
    names = [f"s{i}" for i in range(n)]
    marks: list[float] = []

    def node(i: int) -> Any:
        def run(state: State) -> Any:
            marks.append(time.process_time())
            update = {"n": state.get("n", 0) + 1}
            if goto:
                return Command(update=update, goto=names[i + 1 : i + 2])
            return update

        return run

    builder: Any = StateGraph(State)
    for i, name in enumerate(names):
        builder.add_node(name, node(i))
    builder.add_edge(START, names[0])
    if not goto:
        for a, b in itertools.pairwise(names):
            builder.add_edge(a, b)
        builder.add_edge(names[-1], END)
    graph = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 10**6}
    graph.invoke({"n": 0}, config, durability="sync")
    conn.close()
    cpu = [(b - a) * 1e3 for a, b in itertools.pairwise(marks)]
    tenth = max(1, n // 10)
    return statistics.mean(cpu[: tenth - 1]), statistics.mean(cpu[-tenth:])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gc-off", action="store_true", help="run the delivery with gc disabled")
    args = parser.parse_args()
    n = args.nodes
    tenth = max(1, n // 10)
    early, late = tenth // 2, n - tenth // 2
    marks: list[float] = []
    collections: list[tuple[int, int, float]] = []  # (step, generation, seconds)
    started: dict[int, float] = {}

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[info["generation"]] = time.process_time()
        elif info["generation"] in started:
            spent = time.process_time() - started[info["generation"]]
            collections.append((len(marks), info["generation"], spent))

    encodes: list[str] = []
    excluded = [0.0]  # CPU seconds spent timing the encoding, taken out of the steps
    encode = delta.DeltaCodec.encode
    count = [0]

    def timing(self: Any, thread: str, ns: str, parent: Any, cp: Any, moved: Any = None) -> Any:
        count[0] += 1
        last = self._last.get((thread, ns))
        if count[0] in (early, late) and last is not None and last.id == parent:
            timing_started = time.process_time()
            kept_before = delta.private_copy(last.checkpoint)
            written = dict(last.written)

            def before() -> None:
                delta.diff(kept_before, delta.private_copy(cp))

            def now() -> None:
                delta.diff(last.checkpoint, delta.kept_copy(cp), moved, written)

            best = {}
            for label, work in (("before", before), ("now", now)) * 3:
                spent = min(timeit.repeat(work, number=20, repeat=5)) / 20 * 1e3
                best[label] = min(best.get(label, spent), spent)
            encodes.append(
                f"  step {count[0]:>5}: copy + diff {best['before']:.3f} ms as before, "
                f"{best['now']:.3f} ms now"
            )
            excluded[0] += time.process_time() - timing_started  # not a cost of the step
        return encode(self, thread, ns, parent, cp, moved)

    nodes: dict[str, Any] = {
        f"s{i}": {
            "kind": "action",
            "executor": "step",
            "outputs": {"ok": {"type": "boolean"}},
            "next": f"s{i + 1}" if i + 1 < n else "done",
        }
        for i in range(n)
    }
    nodes["done"] = {"kind": "terminal", "outcome": "succeeded"}

    async def step(_request: Any) -> dict[str, Any]:
        marks.append(time.process_time() - excluded[0])
        return {"ok": True}

    root = Path(tempfile.mkdtemp(prefix="chain-step-"))
    host = HostUnderTest(root, {"step": step}, FileCustody(root / "custody"))
    delta.DeltaCodec.encode = timing  # type: ignore[method-assign]
    gc.callbacks.append(on_gc)
    if args.gc_off:
        gc.disable()
    try:
        asyncio.run(host.run(host.delivery(graph_doc(nodes, "s0"))))
    finally:
        gc.enable()
        gc.callbacks.remove(on_gc)
        delta.DeltaCodec.encode = encode  # type: ignore[method-assign]
        host.close()
    cpu = [(b - a) * 1e3 for a, b in itertools.pairwise(marks)]
    first, last = statistics.mean(cpu[: tenth - 1]), statistics.mean(cpu[-tenth:])
    print(f"1. CPU ms per step, {n}-node chain, FileCustody, one process")
    print(
        f"  steps 1-{tenth}: {first:.3f}   steps {n - tenth}-{n}: {last:.3f}"
        f"   ({last / first - 1:+.1%})"
    )
    print("2. Garbage collection in those tenths: collections (CPU ms) by generation")
    for label, low, high in (("first", 1, tenth), ("last", n - tenth, n)):
        parts = []
        for generation in (0, 1, 2):
            inside = [s for k, g, s in collections if g == generation and low <= k <= high]
            parts.append(f"gen{generation} {len(inside)} ({sum(inside) * 1e3:.1f})")
        print(f"  {label} tenth: " + ", ".join(parts))
    totals = [
        f"gen{g} {sum(1 for _, k, _ in collections if k == g)} "
        f"({sum(x for _, k, x in collections if k == g) * 1e3:.1f})"
        for g in (0, 1, 2)
    ]
    print("  whole delivery: " + ", ".join(totals))
    print("3. Checkpoint delta encoding on the real checkpoints (best of 5x20)")
    print("\n".join(encodes))
    print("4. Raw LangGraph, same chain, CPU ms per step (first tenth, last tenth)")
    for goto in (False, True):
        first, last = raw_chain(n, goto)
        label = "Command(goto)" if goto else "static edges"
        print(f"  {label:<14} {first:.3f}  {last:.3f}  ({last / first - 1:+.1%})")


if __name__ == "__main__":
    main()
