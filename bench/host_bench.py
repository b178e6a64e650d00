"""Host benchmark: the LangGraph Host against raw LangGraph, measured in the same run.

Five measurements, one table each; every Host figure sits next to a raw
LangGraph figure taken in the same process, on the same file system, with the
same SQLite pragmas and ``durability="sync"`` (see ``bench/_raw_langgraph.py``):

1. per-step cost of a trivial action (Host loop vs raw chain);
2. fan-out to a selected half of W = 2 / 8 / 32 branches;
3. database size while a step's outputs accumulate (250 / 500 / 1000 steps);
4. compile once per graph: the 2nd vs the last of 1,000 deliveries;
5. concurrency: 100 deliveries whose executors each sleep 1 s.

Repetitions of Host and raw runs are interleaved and the median is reported,
so a noisy neighbour (disk or CPU) hits both sides alike. CPU ms is
``time.process_time`` (all threads of this process): it does not include
waiting for fsync, so it separates the Host's own work from disk latency.

Usage: ``.venv/bin/python bench/host_bench.py [--quick] [--only 1,3] [--dir DIR]``.
No assertions: targets are printed as met / MISSED.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import itertools
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import _raw_langgraph as raw  # noqa: E402

from contracts import (  # noqa: E402
    InvocationRequest,
)
from execution_system.custody import FileCustody  # noqa: E402
from tests.support.memory_custody import MemoryCustody  # noqa: E402

ITEM = "x" * 94  # + a 6-digit counter = 100 bytes per accumulated item

Behaviour = Callable[[InvocationRequest], Awaitable[dict[str, Any]]]


from _host_support import (  # noqa: E402
    HostUnderTest,
    Timed,
    fan_doc,
    file_sizes,
    kib,
    loop_doc,
    med,
    single_doc,
    table,
    timed,
    verdict,
)

# --- 1. per-step cost -------------------------------------------------------------------------


async def bench_steps(root: Path, steps: int, reps: int) -> float:
    async def step(req: InvocationRequest) -> dict[str, Any]:
        return {"go": "again" if req.activation < steps else "stop"}

    doc = loop_doc(steps + 1)
    mem = HostUnderTest(root / "mem", {"step": step}, MemoryCustody())
    files = HostUnderTest(root / "file", {"step": step}, FileCustody(root / "file" / "custody"))
    saver = raw.saver(root / "raw" / "raw.db")
    graph = raw.chain(steps, saver)
    threads = iter(range(1_000_000))

    async def raw_run() -> None:
        await graph.ainvoke({"n": 0}, raw.config(f"t{next(threads)}"), durability="sync")

    sides: dict[str, Callable[[], Awaitable[Any]]] = {
        "raw": raw_run,
        "mem": lambda: mem.run(mem.delivery(doc)),
        "file": lambda: files.run(files.delivery(doc)),
    }
    for work in sides.values():  # warm-up: compile, imports, first-use caches
        await work()
    got: dict[str, list[Timed]] = {k: [] for k in sides}
    for _ in range(reps):
        for key, work in sides.items():
            got[key].append(await timed(work))
    rows: list[list[Any]] = []
    ratios: dict[str, float] = {}
    raw_wall = med([t.wall for t in got["raw"]]) * 1000 / steps
    raw_cpu = med([t.cpu for t in got["raw"]]) * 1000 / steps
    raw_best = min(t.wall for t in got["raw"]) * 1000 / steps
    labels = {
        "raw": "raw LangGraph (chain, SqliteSaver)",
        "mem": "Host, in-memory custody",
        "file": "Host, FileCustody (empty workspace)",
    }
    for key, label in labels.items():
        wall = med([t.wall for t in got[key]]) * 1000 / steps
        cpu = med([t.cpu for t in got[key]]) * 1000 / steps
        best = min(t.wall for t in got[key]) * 1000 / steps
        rows.append([label, wall, wall / raw_wall, best, best / raw_best, cpu, cpu / raw_cpu])
        ratios[key] = wall / raw_wall
    ratio = ratios["mem"]
    table(
        f"1. Per-step cost of a trivial action, {steps} sequential steps (median of {reps} runs)",
        ["", "ms/step", "x raw", "best ms/step", "best x raw", "CPU ms/step", "CPU x raw"],
        rows,
        f"target: Host (in-memory custody) <= 1.5x raw wall time: {ratio:.2f}x -> "
        f"{verdict(ratio <= 1.5)}\n"
        "ms/step and CPU: medians; best: fastest run (least disturbed by other load).\n"
        "Host: one action node looping through a route (max_visits), then a terminal;\n"
        "its figure includes the terminal step. Raw: a chain of trivial async nodes.",
    )
    mem.close()
    files.close()
    saver.conn.close()
    return ratio


def profile_steps(root: Path, steps: int) -> None:
    """cProfile the Host step loop (in-memory custody); print where the time goes."""
    import cProfile
    import pstats

    async def step(req: InvocationRequest) -> dict[str, Any]:
        return {"go": "again" if req.activation < steps else "stop"}

    doc = loop_doc(steps + 1)
    host = HostUnderTest(root, {"step": step}, MemoryCustody())

    async def runs(k: int) -> None:
        for _ in range(k):
            await host.run(host.delivery(doc))

    asyncio.run(runs(1))
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(runs(2))
    profiler.disable()
    host.close()
    stats: Any = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    per = 1000 / (2 * steps)

    def name(key: tuple[str, int, str]) -> str:
        path, line, func = key
        short = path
        for cut in ("site-packages/", "/lib/python3.11/", "/work/main/"):
            short = short.split(cut)[-1]
        return f"{short}:{line}({func})" if line else func

    by_own = sorted(stats.items(), key=lambda kv: -kv[1][2])[:12]
    table(
        "1b. cProfile of the Host step (in-memory custody): top functions by own time",
        ["function", "calls/step", "own ms/step", "cum ms/step"],
        [[name(k), v[1] / (2 * steps), v[2] * per, v[3] * per] for k, v in by_own],
        "profiler overhead inflates every figure; compare them with each other.",
    )
    here = str(Path(__file__).resolve().parents[1])
    ours = [
        kv
        for kv in stats.items()
        if kv[0][0].startswith(here) and not kv[0][0].startswith((f"{here}/.venv", f"{here}/bench"))
    ]
    by_cum = sorted(ours, key=lambda kv: -kv[1][3])[:14]
    table(
        "1c. cProfile: Host functions by cumulative time",
        ["function", "calls/step", "cum ms/step"],
        [[name(k), v[1] / (2 * steps), v[3] * per] for k, v in by_cum],
    )


# --- 2. fan-out --------------------------------------------------------------------------------


async def bench_fanout(root: Path, widths: Sequence[int], reps: int) -> None:
    def plan_for(width: int) -> Behaviour:
        async def plan(req: InvocationRequest) -> dict[str, Any]:
            return {"pick": [f"b{i}" for i in range(max(1, width // 2))]}

        return plan

    async def branch(req: InvocationRequest) -> dict[str, Any]:
        return {"ok": True}

    results: dict[int, dict[str, float]] = {}
    for width in widths:
        folder = root / f"w{width}"
        host = HostUnderTest(folder, {"plan": plan_for(width), "branch": branch}, MemoryCustody())
        saver = raw.saver(folder / "raw.db")
        graph = raw.fanout(width, saver)
        doc = fan_doc(width)
        threads = iter(range(1_000_000))

        async def raw_run(graph: Any = graph, threads: Any = threads) -> None:
            await graph.ainvoke({}, raw.config(f"t{next(threads)}"), durability="sync")

        async def host_run(host: HostUnderTest = host, doc: Any = doc) -> None:
            await host.run(host.delivery(doc))

        await raw_run()
        await host_run()
        walls: dict[str, list[float]] = {"raw": [], "host": []}
        for _ in range(reps):
            walls["raw"].append((await timed(raw_run)).wall)
            walls["host"].append((await timed(host_run)).wall)
        results[width] = {k: med(v) * 1000 for k, v in walls.items()}
        host.close()
        saver.conn.close()
    rows = []
    prev: tuple[int, dict[str, float]] | None = None
    for width in widths:
        sel = max(1, width // 2)
        r = results[width]
        marginal: list[Any] = ["", ""]
        if prev is not None:
            dsel = sel - max(1, prev[0] // 2)
            marginal = [
                (r["host"] - prev[1]["host"]) / dsel,
                (r["raw"] - prev[1]["raw"]) / dsel,
            ]
        rows.append(
            [
                f"W={width}, selected {sel}",
                r["host"],
                r["raw"],
                r["host"] / sel,
                r["raw"] / sel,
                *marginal,
                r["host"] / r["raw"],
            ]
        )
        prev = (width, r)
    first = [v for v in (rows[1][5], rows[-1][5]) if isinstance(v, float)] if len(rows) > 2 else []
    flat = bool(first) and first[-1] <= 1.5 * first[0]
    table(
        f"2. Fan-out to a selected half of W branches (median of {reps} deliveries per W)",
        [
            "",
            "Host ms",
            "raw ms",
            "Host ms/branch",
            "raw ms/branch",
            "Host +ms/branch",
            "raw +ms/branch",
            "Host x raw",
        ],
        rows,
        "ms/branch = whole delivery / selected branches (includes plan, parallel, barrier,\n"
        "terminal). +ms/branch = extra time per extra selected branch vs the previous W.\n"
        f"target: Host marginal cost per branch flat as W grows "
        f"(W={widths[-1]} within 1.5x of W={widths[1] if len(widths) > 1 else '?'}) -> "
        f"{verdict(flat)}\n"
        "Raw: plan -> conditional edges to the selected names -> deferred join node.",
    )


# --- 3. database size with accumulating outputs ----------------------------------------------


def _item(k: int) -> str:
    return f"{k:06d}{ITEM}"


async def bench_growth(root: Path, checkpoints: Sequence[int]) -> None:
    total = checkpoints[-1]
    marks = set(checkpoints)
    sizes: dict[str, dict[int, tuple[int, int, int]]] = {"raw": {}, "item": {}, "list": {}}
    produced: dict[str, dict[int, int]] = {"raw": {}, "item": {}, "list": {}}
    running = {"raw": 0, "item": 0, "list": 0}

    def probe(key: str, db: Path, done: int) -> None:
        # Called at the start of step done+1: the first `done` steps are committed.
        if done in marks:
            sizes[key][done] = file_sizes(db)
            produced[key][done] = running[key]

    # raw LangGraph: a list channel with an operator.add reducer.
    raw_db = root / "raw" / "raw.db"
    saver = raw.saver(raw_db)

    def on_step(n: int) -> None:
        probe("raw", raw_db, n)
        running["raw"] += len(_item(n + 1))

    graph = raw.growing(total, ITEM, saver, on_step=on_step)
    t = await timed(lambda: graph.ainvoke({"n": 0}, raw.config("grow"), durability="sync"))
    probe("raw", raw_db, total)
    walls = {"raw": t.wall}
    saver.conn.close()

    # Host, executor returns only the new item (the Host stores each output once).
    async def new_item(req: InvocationRequest) -> dict[str, Any]:
        probe("item", hosts["item"].store, req.activation - 1)
        out = {"item": _item(req.activation), "go": "again" if req.activation < total else "stop"}
        running["item"] += len(out["item"])
        return out

    # Host, executor returns the whole growing list (reads its own previous output).
    async def whole_list(req: InvocationRequest) -> dict[str, Any]:
        probe("list", hosts["list"].store, req.activation - 1)
        items = [*(req.input.get("prev") or []), _item(req.activation)]
        running["list"] += sum(len(i) for i in items)
        return {"items": items, "go": "again" if req.activation < total else "stop"}

    hosts = {
        "item": HostUnderTest(root / "item", {"step": new_item}, MemoryCustody()),
        "list": HostUnderTest(root / "list", {"step": whole_list}, MemoryCustody()),
    }
    docs = {
        "item": loop_doc(total + 1, {"item": {"type": "string"}}),
        "list": loop_doc(
            total + 1, {"items": {"type": "array", "items": {"type": "string"}}}, prev="step.items?"
        ),
    }
    for key in ("item", "list"):
        h = hosts[key]
        delivery = h.delivery(docs[key])
        walls[key] = (await timed(partial(h.run, delivery))).wall
        sizes[key][total] = file_sizes(h.store)
        produced[key][total] = running[key]
        h.close()

    labels = {
        "raw": "raw LangGraph, operator.add list",
        "item": "Host, executor returns the new item",
        "list": "Host, executor returns the whole list",
    }
    rows = []
    for key, label in labels.items():
        for n in checkpoints:
            main, wal, logical = sizes[key][n]
            rows.append(
                [
                    label if n == checkpoints[0] else "",
                    n,
                    kib(main),
                    kib(wal),
                    kib(main + wal),
                    kib(logical),
                    kib(produced[key][n]),
                    f"{logical / max(1, produced[key][n]):.1f}",
                ]
            )

    def growth(key: str) -> str:
        parts = []
        for a, b in itertools.pairwise(checkpoints):
            stored = sizes[key][b][2] - sizes[key][a][2]
            made = produced[key][b] - produced[key][a]
            parts.append(
                f"steps {a}..{b}: {stored / (b - a) / 1024:.1f} KiB/step, "
                f"{stored / max(1, made):.1f} B per B produced"
            )
        return "; ".join(parts)

    table(
        f"3. Store size while step outputs accumulate ({total} steps, ~100-byte items)",
        ["", "steps", "db", "-wal", "db + wal", "logical db", "bytes produced", "logical/produced"],
        rows,
        "bytes produced = what the executor returned (raw: the new item appended per step).\n"
        "Sizes are taken at the start of step n+1 (n steps committed) and after the run.\n"
        "logical db growth per step:\n"
        f"  raw {growth('raw')}\n  Host new item {growth('item')}\n"
        f"  Host whole list {growth('list')}\n"
        f"wall time: raw {walls['raw']:.1f} s, Host new item {walls['item']:.1f} s, "
        f"Host whole list {walls['list']:.1f} s.\n"
        "logical db = page_count x page_size seen by a reader (the WAL's pages included).\n"
        "The -wal file is not truncated after SQLite's automatic checkpoints, so it stays\n"
        "at its largest size; db + wal is what the disk holds.",
    )


# --- 4. compile once per graph ------------------------------------------------------------------


async def bench_compile(root: Path, count: int) -> None:
    started: dict[str, float] = {}

    async def work(req: InvocationRequest) -> dict[str, Any]:
        started.setdefault(req.delivery, time.perf_counter())
        return {"ok": True}

    host = HostUnderTest(root / "host", {"work": work}, MemoryCustody())
    doc = single_doc()
    deliveries = [host.delivery(doc) for _ in range(count)]  # admission is not timed
    run_s: list[float] = []
    start_s: list[float] = []
    compiles_after_first = -1
    for i, d in enumerate(deliveries):
        t0 = time.perf_counter()
        await host.run(d)
        run_s.append(time.perf_counter() - t0)
        start_s.append(started[d.delivery_id] - t0)
        if i == 0:
            compiles_after_first = host.host.compiles
    compiles = host.host.compiles
    host.close()

    saver = raw.saver(root / "raw" / "raw.db")
    graph = raw.single(saver)
    raw_s: list[float] = []
    for i in range(count):
        t0 = time.perf_counter()
        await graph.ainvoke({"n": 0}, raw.config(f"t{i}"), durability="sync")
        raw_s.append(time.perf_counter() - t0)
    compile_s = []
    for _ in range(20):
        t0 = time.perf_counter()
        raw.single(saver)
        compile_s.append(time.perf_counter() - t0)
    saver.conn.close()

    k = min(50, count // 4)
    series: list[tuple[str, list[float]]] = [
        ("Host: run() -> executor called", start_s),
        ("Host: whole delivery (run() returns)", run_s),
        ("raw LangGraph: whole thread (ainvoke)", raw_s),
    ]
    rows = [
        [label, *(v * 1000 for v in (s[1], med(s[1 : 1 + k]), s[-1], med(s[-k:])))]
        for label, s in series
    ]
    drift = med(run_s[-k:]) / med(run_s[1 : 1 + k])
    table(
        f"4. Compile once per graph: {count} deliveries of one graph, run one after another (ms)",
        ["", "2nd", f"median 2..{k + 1}", f"{count}th", f"median last {k}"],
        rows,
        f"host.compiles after the 1st delivery: {compiles_after_first}; after all {count}: "
        f"{compiles} (target 1) -> {verdict(compiles == 1)}\n"
        f"first delivery (compiles, imports): run() -> executor {start_s[0] * 1000:.1f} ms, "
        f"whole {run_s[0] * 1000:.1f} ms; compiling this graph in raw LangGraph: "
        f"{med(compile_s) * 1000:.2f} ms.\n"
        f"last {k} vs first {k} (whole delivery): {drift:.2f}x",
    )


# --- 5. concurrency -----------------------------------------------------------------------------


async def bench_concurrency(root: Path, count: int, sleep_s: float) -> None:
    async def work(req: InvocationRequest) -> dict[str, Any]:
        await asyncio.sleep(sleep_s)
        return {"ok": True}

    host = HostUnderTest(root / "host", {"work": work}, MemoryCustody())
    doc = single_doc()
    await host.run(host.delivery(doc))  # warm-up: compile
    deliveries = [host.delivery(doc) for _ in range(count)]
    t = await timed(lambda: asyncio.gather(*(host.run(d) for d in deliveries)))
    statuses = {str(host.host.status(d.delivery_id).status.value) for d in deliveries}
    host.close()

    saver = raw.saver(root / "raw" / "raw.db")
    graph = raw.single(saver, sleep_s)
    await graph.ainvoke({"n": 0}, raw.config("warm"), durability="sync")
    r = await timed(
        lambda: asyncio.gather(
            *(graph.ainvoke({"n": 0}, raw.config(f"t{i}"), durability="sync") for i in range(count))
        )
    )
    saver.conn.close()
    rows = [
        [
            "Host (one Host, asyncio.gather)",
            count,
            t.wall,
            (t.wall - sleep_s) * 1000 / count,
            t.cpu,
        ],
        ["raw LangGraph (asyncio.gather)", count, r.wall, (r.wall - sleep_s) * 1000 / count, r.cpu],
    ]
    table(
        f"5. Concurrency: {count} deliveries, each executor awaits asyncio.sleep({sleep_s:g})",
        ["", "deliveries", "wall s", "overhead ms/delivery", "CPU s"],
        rows,
        f"serial would take {count * sleep_s:.0f} s. Host statuses: {sorted(statuses)}.\n"
        f"target: a few seconds -> {verdict(t.wall <= 5.0)}",
    )


# --- main ---------------------------------------------------------------------------------------


def header(folder: Path) -> None:
    def ver(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "?"

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print("Host benchmark (LangGraph Host vs raw LangGraph, same run)")
    print(
        f"langgraph {ver('langgraph')}, langgraph-checkpoint {ver('langgraph-checkpoint')}, "
        f"langgraph-checkpoint-sqlite {ver('langgraph-checkpoint-sqlite')}"
    )
    print(
        f"python {platform.python_version()} ({platform.python_implementation()}), "
        f"nproc {os.cpu_count()}, load average {load}"
    )
    print(f"store folder: {folder} (SQLite WAL, synchronous=FULL, durability='sync')")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run, well under 30 s")
    parser.add_argument("--only", default="1,2,3,4,5", help="comma-separated measurements")
    parser.add_argument("--dir", default=None, help="folder for the store files (default: tmp)")
    parser.add_argument("--profile", action="store_true", help="profile the Host step anyway")
    parser.add_argument("--keep", action="store_true", help="keep the store files")
    args = parser.parse_args(argv)
    only = {int(x) for x in args.only.split(",") if x.strip()}
    folder = Path(tempfile.mkdtemp(prefix="host-bench-", dir=args.dir))
    header(folder)
    q = args.quick
    started = time.perf_counter()
    try:
        if 1 in only:
            ratio = asyncio.run(bench_steps(folder / "steps", 50 if q else 200, 3 if q else 7))
            if ratio > 1.5 or args.profile:
                profile_steps(folder / "profile", 50 if q else 200)
        if 2 in only:
            asyncio.run(bench_fanout(folder / "fanout", (2, 8, 32), 2 if q else 7))
        if 3 in only:
            marks = (50, 100, 200) if q else (250, 500, 1000)
            asyncio.run(bench_growth(folder / "growth", marks))
        if 4 in only:
            asyncio.run(bench_compile(folder / "compile", 100 if q else 1000))
        if 5 in only:
            asyncio.run(bench_concurrency(folder / "concurrency", 100, 1.0))
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
