"""Fleet benchmark on PostgreSQL: per-step cost of raw LangGraph, the Host and DBOS.

Run: ``.venv/bin/python bench/fleet_bench.py --store postgresql://USER:PW@HOST:5432/DB``
(an empty database of its own; the bench creates its tables and leaves them). DBOS is an
optional peer: ``.venv/bin/pip install -e '.[bench]'``; without it its rows are skipped.

All rows run in this one process, one after another, on the same database, each delivery a
chain of ``--steps`` trivial nodes (or, for DBOS, a workflow of as many steps):

* ``raw-langgraph``: the stock ``AsyncPostgresSaver`` (its own lock, one connection),
  ``durability="sync"`` as the Host uses.
* ``host``: the Workflow Host on the PostgreSQL store (``--store`` URL), a delivery of a loop
  node run ``--steps`` times (a trivial in-process executor, in-memory custody): each step is
  validated, journaled and committed with its checkpoint, fencing check included.
* ``dbos``: a DBOS workflow of ``--steps`` ``@DBOS.step`` calls, its system tables in the
  same database (schema ``dbos``).

Also measured: bytes stored per 1,000 steps at two sizes (linear growth means the same
figure at both) and the time from a lease's expiry to a stale writer being fenced.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row

from runner import migrate_postgres

SETTINGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": None, "row_factory": dict_row}


class State(TypedDict):
    n: int


def chain(steps: int, saver: Any) -> Any:
    builder: StateGraph[State] = StateGraph(State)

    async def step(state: State) -> dict[str, Any]:
        return {"n": state["n"] + 1}

    for i in range(steps):
        builder.add_node(f"s{i}", step)
        builder.add_edge(START if i == 0 else f"s{i - 1}", f"s{i}")
    builder.add_edge(f"s{steps - 1}", END)
    return builder.compile(checkpointer=saver)


class Timed:
    """Wraps a saver's ``aput`` to record each commit's latency."""

    def __init__(self, saver: Any) -> None:
        self.latencies: list[float] = []
        original = saver.aput

        async def aput(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                self.latencies.append(time.perf_counter() - t0)

        saver.aput = aput


def row(
    name: str, deliveries: int, steps: int, wall: float, cpu: float, lat: list[float]
) -> dict[str, Any]:
    lat_ms = sorted(x * 1000 for x in lat) or [0.0]
    return {
        "system": name,
        "deliveries/s": deliveries / wall,
        "steps/s": deliveries * steps / wall,
        "ms/step": wall * 1000 / (deliveries * steps),
        "p50 commit ms": statistics.median(lat_ms),
        "p99 commit ms": lat_ms[min(len(lat_ms) - 1, int(len(lat_ms) * 0.99))],
        "cpu %": 100 * cpu / wall,
    }


def table_bytes(url: str, like: str) -> int:
    with psycopg.connect(url) as conn:
        got = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND (n.nspname || '.' || c.relname) LIKE %s",
            (like,),
        ).fetchone()
    return int(got[0]) if got else 0


async def run_raw(url: str, deliveries: int, steps: int, tag: str) -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(url, **SETTINGS) as conn:
        saver = AsyncPostgresSaver(conn)
        timer = Timed(saver)
        graph = chain(steps, saver)
        c0, t0 = time.process_time(), time.perf_counter()
        for d in range(deliveries):
            cfg: Any = {"configurable": {"thread_id": f"raw-{tag}-{d}"}}
            await graph.ainvoke({"n": 0}, cfg, durability="sync")
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return row("raw-langgraph", deliveries, steps, wall, cpu, timer.latencies)


def run_host(url: str, deliveries: int, steps: int, folder: Path) -> dict[str, Any]:
    from bench._host_support import BenchInvoker, loop_doc
    from contracts import InvocationRequest, LangGraphHostConfig
    from runner import RunnerFactory
    from tests.host.harness import make_delivery
    from tests.support.memory_custody import MemoryCustody

    async def step(req: InvocationRequest) -> dict[str, Any]:
        return {"go": "again" if req.activation < steps else "stop"}

    config = LangGraphHostConfig(engine="langgraph", store=url, data_dir=str(folder))
    runner = RunnerFactory(config).create(
        custody=MemoryCustody(), invoker=BenchInvoker({"step": step})
    )
    host: Any = runner.host
    saver = host.substrate.saver
    timer = Timed(saver)
    doc = loop_doc(steps + 1)
    tag = f"{time.time_ns()}"

    async def drive() -> tuple[float, float]:
        c0, t0 = time.process_time(), time.perf_counter()
        for d in range(deliveries):
            report = await host.run(make_delivery(doc, None, nonce=f"{tag}-{d}"))
            assert report.status == "completed", report
        return time.perf_counter() - t0, time.process_time() - c0

    try:
        wall, cpu = asyncio.run(drive())
    finally:
        runner.close()
    return row("host", deliveries, steps, wall, cpu, timer.latencies)


def run_dbos(url: str, deliveries: int, steps: int) -> dict[str, Any] | None:
    try:
        from dbos import DBOS
    except ImportError:
        return None
    latencies: list[float] = []

    @DBOS.step()
    def step(n: int) -> int:
        return n + 1

    @DBOS.workflow()
    def workflow() -> int:
        n = 0
        for _ in range(steps):
            t0 = time.perf_counter()
            n = step(n)
            latencies.append(time.perf_counter() - t0)
        return n

    DBOS(config={"name": "fleetbench", "system_database_url": url, "log_level": "WARNING"})
    DBOS.launch()
    try:
        workflow()  # warm-up: first-call costs are not per-step costs
        latencies.clear()
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(deliveries):
            assert workflow() == steps
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        DBOS.destroy()
    return row("dbos", deliveries, steps, wall, cpu, latencies)


def fence_delay(url: str, ttl: float, rounds: int, folder: Path) -> list[float]:
    """Seconds from a lease's expiry to a stale writer's refused write (two lease managers)."""
    from contracts import ExecsysError
    from host._lease import LeaseManager, check_token
    from host.storage.postgres import PostgresStorage

    stale_store, taker_store = PostgresStorage.open(url), PostgresStorage.open(url)
    stale = LeaseManager(stale_store, folder / "a", "bench-a:1:a", ttl_s=ttl)
    taker = LeaseManager(taker_store, folder / "b", "bench-b:2:b", ttl_s=30)
    delays = []
    try:
        for i in range(rounds):
            delivery = f"fence-{time.time_ns()}-{i}"
            token = stale.acquire(delivery)
            lease = stale_store.lease(delivery)
            assert lease is not None
            taker.acquire(delivery, wait_s=ttl * 10)
            try:
                with stale_store.transaction() as tx:
                    check_token(tx, delivery, token)
                raise AssertionError("the stale write was not fenced")
            except ExecsysError:
                delays.append(time.time() - lease.expires)
    finally:
        stale_store.close()
        taker_store.close()
    return delays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=os.environ.get("EXECSYS_BENCH_POSTGRES"), required=False)
    parser.add_argument("--deliveries", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--no-dbos", action="store_true")
    args = parser.parse_args()
    if not args.store:
        parser.error("--store postgresql://... (or EXECSYS_BENCH_POSTGRES) is required")
    url = args.store
    migrate_postgres(url)
    n, steps = args.deliveries, args.steps
    rows: list[dict[str, Any]] = []
    sizes: dict[str, list[tuple[int, int]]] = {}
    tag = str(int(time.time()))
    folder = Path(tempfile.mkdtemp(prefix="fleet-bench-"))

    def raw(count: int, suffix: str) -> dict[str, Any]:
        return asyncio.run(run_raw(url, count, steps, tag + suffix))

    def host(count: int, suffix: str) -> dict[str, Any]:
        return run_host(url, count, steps, folder)

    for label, side in (("raw-langgraph", raw), ("host", host)):
        side(3, "w")  # warm-up: imports, compile, first-use caches
        before = table_bytes(url, "public.%")
        rows.append(side(n, ""))
        half = table_bytes(url, "public.%")
        side(n, "b")
        sizes[label] = [
            (n * steps, half - before),
            (2 * n * steps, table_bytes(url, "public.%") - before),
        ]
    if not args.no_dbos:
        got = run_dbos(url, n, steps)
        if got is not None:
            rows.append(got)
    keys = list(rows[0])
    print(f"{n} deliveries x {steps} steps each, one process, PostgreSQL at {url.split('@')[-1]}")
    print(" | ".join(f"{k:>14}" for k in keys))
    for r in rows:
        print(" | ".join(f"{v:>14.2f}" if isinstance(v, float) else f"{v:>14}" for v in r.values()))
    by = {r["system"]: r for r in rows}
    ratio = by["host"]["ms/step"] / by["raw-langgraph"]["ms/step"]
    print(f"host per-step cost / raw LangGraph: {ratio:.2f}x (target <= 1.3x)")
    if "dbos" in by:
        print(
            f"host steps/s / DBOS steps/s: "
            f"{by['host']['steps/s'] / by['dbos']['steps/s']:.2f}x (target >= 1x)"
        )
    for label, points in sizes.items():
        per = [b * 1000 / s for s, b in points]
        print(
            f"{label}: bytes per 1,000 steps at {points[0][0]} steps {per[0]:,.0f}, "
            f"at {points[1][0]} steps {per[1]:,.0f} (total tables incl. indexes)"
        )
    delays = fence_delay(url, 0.2, 20, folder)
    print(
        f"lease expiry -> stale writer fenced: p50 {statistics.median(delays) * 1000:.1f} ms, "
        f"max {max(delays) * 1000:.1f} ms over {len(delays)} (the taker polls every 10 ms)"
    )


if __name__ == "__main__":
    main()
