"""Fleet benchmark on PostgreSQL: per-step cost of raw LangGraph, the fenced saver and DBOS.

Run: ``.venv/bin/python bench/fleet_bench.py --store postgresql://USER:PW@HOST:5432/DB``
(an empty database of its own; the bench creates its tables and leaves them). DBOS is an
optional peer: ``.venv/bin/pip install -e '.[bench]'``; without it its rows are skipped.

All rows run in this one process, one after another, on the same database, each delivery a
chain of ``--steps`` trivial nodes (or, for DBOS, a workflow of as many steps):

* ``raw-langgraph``: the stock ``AsyncPostgresSaver`` (its own lock, one connection),
  ``durability="sync"`` as the Host uses.
* ``fenced-saver``: ``FencedPostgresSaver`` on a pool, with the Host-shaped extra rows in the
  checkpoint's transaction (fencing check ``FOR SHARE``, one journal row, the status row).
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
import time
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from host.langgraph._pg_saver import FencedPostgresSaver
from host.storage.postgres import aconnect, check_token, grant
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


async def journal_and_status(
    cur: Any, thread: str, checkpoint: Any, metadata: Any, _v: Any
) -> None:
    ordinal = int(metadata.get("step", -1)) + 2
    await cur.execute(
        "INSERT INTO execsys_journal (delivery, ordinal, digest, line) VALUES (%s, %s, %s, %s)",
        (thread, ordinal, checkpoint["id"], b'{"kind":"node-completed"}'),
    )
    await cur.execute(
        "UPDATE execsys_deliveries SET status = 'running', checkpoint = %s, updated = %s "
        "WHERE delivery = %s",
        (checkpoint["id"], time.time(), thread),
    )


async def run_fenced(url: str, deliveries: int, steps: int, tag: str) -> dict[str, Any]:
    async with AsyncConnectionPool(
        url, min_size=2, max_size=4, kwargs=SETTINGS, open=False
    ) as pool:
        saver = FencedPostgresSaver(pool, on_put=journal_and_status)
        timer = Timed(saver)
        graph = chain(steps, saver)
        lease = await aconnect(url)
        c0, t0 = time.process_time(), time.perf_counter()
        for d in range(deliveries):
            thread = f"fenced-{tag}-{d}"
            await lease.execute(
                "INSERT INTO execsys_deliveries (delivery, graph, graph_digest, digest, document, "
                "status, created, updated) VALUES (%s, 'chain', '', '', '', 'running', 0, 0)",
                (thread,),
            )
            token = await grant(lease, thread, "bench", 30)
            assert token is not None
            saver.tokens[thread] = token
            await graph.ainvoke(
                {"n": 0}, {"configurable": {"thread_id": thread}}, durability="sync"
            )
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        await lease.close()
    return row("fenced-saver", deliveries, steps, wall, cpu, timer.latencies)


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


async def fence_delay(url: str, ttl: float, rounds: int) -> list[float]:
    """Seconds from a lease's expiry (database clock) to a stale writer's refused write."""
    delays = []
    holder, taker = await aconnect(url), await aconnect(url)
    try:
        for i in range(rounds):
            delivery = f"fence-{os.getpid()}-{i}"
            stale = await grant(holder, delivery, "stale", ttl)
            cur = await holder.execute(
                "SELECT expires AS e FROM execsys_leases WHERE delivery = %s",
                (delivery,),
            )
            expires = float((await cur.fetchone())["e"])
            while await grant(taker, delivery, "taker", 30) is None:  # noqa: ASYNC110
                await asyncio.sleep(0.002)
            try:
                async with holder.transaction(), holder.cursor() as c:
                    await check_token(c, delivery, stale)
                raise AssertionError("the stale write was not fenced")
            except Exception as exc:
                if "fenced" not in str(exc) and "lost the delivery" not in str(exc):
                    raise
            cur = await holder.execute("SELECT extract(epoch FROM clock_timestamp()) AS n")
            delays.append(float((await cur.fetchone())["n"]) - expires)
    finally:
        await holder.close()
        await taker.close()
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
    sizes: dict[str, list[tuple[int, int]]] = {"raw-langgraph": [], "fenced-saver": []}
    tag = str(int(time.time()))
    for label, runner in (("raw-langgraph", run_raw), ("fenced-saver", run_fenced)):
        asyncio.run(runner(url, 3, steps, tag + "w"))  # warm-up
        like = "public.checkpoint%" if label == "raw-langgraph" else "public.%"
        before = table_bytes(url, like)
        rows.append(asyncio.run(runner(url, n, steps, tag)))
        half = table_bytes(url, like)
        asyncio.run(runner(url, n, steps, tag + "b"))
        sizes[label] = [
            (n * steps, half - before),
            (2 * n * steps, table_bytes(url, like) - before),
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
    ratio = by["fenced-saver"]["ms/step"] / by["raw-langgraph"]["ms/step"]
    print(f"fenced-saver per-step cost / raw LangGraph: {ratio:.2f}x (target <= 1.3x)")
    if "dbos" in by:
        print(
            f"fenced-saver steps/s / DBOS steps/s: "
            f"{by['fenced-saver']['steps/s'] / by['dbos']['steps/s']:.2f}x (target >= 1x)"
        )
    for label, points in sizes.items():
        per = [b * 1000 / s for s, b in points]
        print(
            f"{label}: bytes per 1,000 steps at {points[0][0]} steps {per[0]:,.0f}, "
            f"at {points[1][0]} steps {per[1]:,.0f} (total tables incl. indexes)"
        )
    delays = asyncio.run(fence_delay(url, 0.2, 20))
    print(
        f"lease expiry -> stale writer fenced: p50 {statistics.median(delays) * 1000:.1f} ms, "
        f"max {max(delays) * 1000:.1f} ms over {len(delays)} (taker polls every 2 ms)"
    )


if __name__ == "__main__":
    main()
