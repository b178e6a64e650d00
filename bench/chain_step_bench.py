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

Usage: ``.venv/bin/python bench/chain_step_bench.py [--nodes 1000]``. No assertions.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    n = parser.parse_args().nodes
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
    encode = delta.DeltaCodec.encode
    count = [0]

    def timing(self: Any, thread: str, ns: str, parent: Any, cp: Any, moved: Any = None) -> Any:
        count[0] += 1
        last = self._last.get((thread, ns))
        if count[0] in (early, late) and last is not None and last.id == parent:
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
        marks.append(time.process_time())
        return {"ok": True}

    root = Path(tempfile.mkdtemp(prefix="chain-step-"))
    host = HostUnderTest(root, {"step": step}, FileCustody(root / "custody"))
    delta.DeltaCodec.encode = timing  # type: ignore[method-assign]
    gc.callbacks.append(on_gc)
    try:
        asyncio.run(host.run(host.delivery(graph_doc(nodes, "s0"))))
    finally:
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
    print("3. Checkpoint delta encoding on the real checkpoints (best of 5x20)")
    print("\n".join(encodes))


if __name__ == "__main__":
    main()
