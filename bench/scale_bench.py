"""Many deliveries and long deliveries: listing, runner memory, store growth.

1. **Runner memory.** One process drives N deliveries (default 10,000; each a
   real run to its action-input question through the Host, default
   ``FileCustody``) and samples its resident set size after 100, 1,000, ...
   deliveries (target: RSS at 1,000 within 10% of RSS at 100).
2. **Listing.** ``execsys status --store URL`` and ``execsys status --json``
   (every delivery) as whole processes against that store, median of 5
   (target: under 1 s with 10,000 deliveries), beside ``execsys status``
   of one delivery as the start-up floor.
3. **Store growth.** Chains of N trivial python actions (``--chains``, default
   250,500,1000) run by ``execsys run`` with the default custody; the store's
   bytes per step at each length. Linear growth keeps bytes/step flat; the
   checkpoint of a chain carries per-node state, so bytes/step grows with N.

Run: ``.venv/bin/python bench/scale_bench.py [--deliveries N] [--store DIR]
[--chains 250,500,1000]``. A populated ``--store DIR`` is reused (part 1 then
drives only what is missing). Prints tables; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _host_support import file_sizes, kib, table  # noqa: E402
from web_bench import ASK, SMALL  # noqa: E402

from execution_system import admit, parse_graph  # noqa: E402
from execution_system._compose import open_runner  # noqa: E402

EXECSYS = str(Path(sys.executable).with_name("execsys"))


def rss_kib() -> int:
    """This process's resident set size (VmRSS), KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def drive(store: str, count: int) -> list[tuple[int, int, float]]:
    """Drive deliveries up to ``count`` in this process: (driven, RSS KiB, ms each) samples."""
    runner = open_runner(store)
    host = runner.host
    marks = {100, 300, 1_000, 3_000, 10_000, 30_000, count}
    samples: list[tuple[int, int, float]] = []
    try:
        have = len(host.deliveries())
        small = parse_graph(SMALL)

        async def fill() -> None:
            started = time.perf_counter()
            for i in range(1, count - have + 1):
                delivery = admit(small, {}, executors={"ask": ASK}, nonce=uuid.uuid4().hex)
                await host.run(delivery)
                if i in marks:
                    took = time.perf_counter() - started
                    samples.append((i, rss_kib(), 1000 * took / i))

        asyncio.run(fill())
    finally:
        runner.close()
    return samples


def listing(store: str, reps: int) -> list[tuple[str, float, float]]:
    """(command, median ms, max ms) of whole ``execsys status`` processes."""
    one = json.loads(
        subprocess.run(
            [EXECSYS, "status", "--store", store, "--json"], capture_output=True, check=True
        ).stdout
    )
    some = one["deliveries"][0]["delivery"] if isinstance(one, dict) else one[0]["delivery"]
    commands = {
        "execsys status DELIVERY (floor)": [EXECSYS, "status", some, "--store", store],
        "execsys status": [EXECSYS, "status", "--store", store],
        "execsys status --json": [EXECSYS, "status", "--store", store, "--json"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(reps):
        for name, argv in commands.items():  # alternate, so drift hits every arm alike
            started = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=True)
            times[name].append(1000 * (time.perf_counter() - started))
    return [(n, statistics.median(t), max(t)) for n, t in times.items()]


STEP = 'async def step(request):\n    return {"status": "completed", "output": {"ok": True}}\n'


def chain(n: int) -> dict[str, Any]:
    """A chain of ``n`` trivial python actions ending in a terminal."""
    nodes: dict[str, Any] = {}
    for i in range(n):
        nodes[f"s{i:05d}"] = {
            "kind": "action",
            "executor": "step",
            "outputs": {"ok": {"type": "boolean"}},
            "next": f"s{i + 1:05d}" if i < n - 1 else "end",
        }
    nodes["end"] = {"kind": "terminal", "outcome": "succeeded"}
    return {"spec": "execution-system/v1", "graph": f"chain-{n}", "start": "s00000", "nodes": nodes}


def store_flag(db: Path) -> list[str]:
    """``--store`` for ``db`` and ``--json``."""
    return ["--store", f"sqlite:///{db}", "--json"]


def run_chain(folder: Path, n: int, store: list[str]) -> float | None:
    """Seconds of one ``execsys run`` of a chain of ``n`` steps in ``folder``; None if it failed."""
    (folder / "steps.py").write_text(STEP)
    (folder / "execsys.yaml").write_text('executors:\n  step: {python: "steps:step"}\n')
    (folder / "chain.json").write_text(json.dumps(chain(n)))
    started = time.perf_counter()
    done = subprocess.run(
        [EXECSYS, "run", "chain.json", "--config", "execsys.yaml", *store],
        capture_output=True,
        text=True,
        check=False,
        cwd=folder,
    )
    if done.returncode != 0:
        print(f"chain of {n}: execsys run failed: {done.stderr.strip()[:300]}")
        return None
    return time.perf_counter() - started


def growth(lengths: list[int]) -> list[tuple[int, float, int, float]]:
    """(steps, seconds, store bytes, bytes per step) of ``execsys run`` on chains."""
    rows = []
    for n in lengths:
        with tempfile.TemporaryDirectory(prefix="execsys-scale-") as scratch:
            db = Path(scratch) / "state.db"
            took = run_chain(Path(scratch), n, store_flag(db))
            if took is None:
                continue
            size = file_sizes(db)[2]  # logical size: main file + WAL as a reader sees it
            rows.append((n, took, size, size / n))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=10_000)
    parser.add_argument("--store", help="a folder whose state.db is reused")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--chains", default="250,500,1000")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="execsys-scale-") as scratch:
        folder = Path(args.store or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        store = f"sqlite:///{folder / 'state.db'}"
        samples = drive(store, args.deliveries)
        if samples:
            base = next((s[1] for s in samples if s[0] == 100), samples[0][1])
            table(
                "One runner process driving deliveries (each to its question)",
                ["driven", "RSS", "vs 100", "ms per delivery"],
                [(d, kib(r * 1024), f"{r / base:.2f}x", f"{ms:.1f}") for d, r, ms in samples],
                "target: RSS at 1,000 within 10% of RSS at 100",
            )
        rows = listing(store, args.reps)
        table(
            f"Whole-process listing, {args.deliveries:,} deliveries in the store",
            ["command", "median ms", "max ms"],
            [(n, f"{m:.0f}", f"{x:.0f}") for n, m, x in rows],
            "target: execsys status under 1 s",
        )
    lengths = [int(x) for x in args.chains.split(",") if x]
    if lengths:
        grown = growth(lengths)
        table(
            "Store size after execsys run of a chain (FileCustody, SQLite)",
            ["steps", "run s", "store", "bytes/step"],
            [(n, f"{t:.1f}", kib(size), f"{per:,.0f}") for n, t, size, per in grown],
            "linear growth keeps bytes/step flat",
        )


if __name__ == "__main__":
    main()
