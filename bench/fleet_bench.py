"""Fleet benchmark on PostgreSQL: per-step cost of raw LangGraph, the Host and DBOS.

Run: ``.venv/bin/python bench/fleet_bench.py --store postgresql://USER:PW@HOST:5432/DB``
(an empty database of its own; the bench creates its tables and leaves them). DBOS is an
optional peer: ``.venv/bin/pip install -e '.[bench]'``; without it its rows are skipped.

All rows run in this one process, one after another, on the same database, each delivery a
chain of ``--steps`` trivial nodes (or, for DBOS, a workflow of as many steps):

* ``raw-langgraph``: the stock ``AsyncPostgresSaver`` (its own lock, one connection opened
  with the settings its ``from_conn_string`` uses, prepared statements included),
  ``durability="sync"`` as the Host uses.
* ``host``: the Workflow Host on the PostgreSQL store (``--store`` URL), a delivery of a loop
  node run ``--steps`` times (a trivial in-process executor, in-memory custody): each step is
  validated, journaled and committed with its checkpoint, fencing check included.
* ``dbos``: a DBOS workflow of ``--steps`` ``@DBOS.step`` calls, its system tables in a
  database of its own on the same server (``--dbos-store``; by default the ``--store``
  database's name plus ``_dbos``, created if missing). Without DBOS installed the bench
  prints ``DBOS: not installed`` and goes on.

``stmts/step`` counts the SQL statements each side sends through psycopg per step (each row
of an ``executemany`` counts as one; in a pipeline several travel in one round trip).

Also measured: bytes stored per 1,000 steps at two sizes (linear growth means the same
figure at both) and the time from a lease's expiry to a stale writer being fenced.

First, before anything counts statements, the marginal table (``bench/_fleet_marginal.py``):
raw LangGraph and the Host on deliveries of ``--steps`` and ``--long-steps`` (3 x ``--steps``)
steps in ``--rounds`` alternating rounds, which splits each side's cost into a step's marginal
cost and a delivery's fixed cost. ``--marginal-only`` prints that table alone.

Then the fleet rows (``serve xN``, see ``bench/_fleet_serve.py``): ``--fleet-deliveries``
queued deliveries of ``--steps`` steps drained by 1, 2 and 4 ``execsys serve`` processes
(``--fleet-processes``) on the same database, each process ``--fleet-concurrency`` deliveries
at a time. ``--fleet-only`` skips the one-process rows; ``--profile FILE`` adds a one-process
round (not in the table) whose runner runs under a CPU-time cProfile.

``--chains 250,500,1000`` prints only the storage of long chains: for each length, one
``execsys run`` process of a chain of that many trivial python actions (the default
``FileCustody``, the ``--store`` database), then raw LangGraph's ``AsyncPostgresSaver`` on a
chain as long, and the growth of the database's tables around each (decision 0155).

``--host-only`` runs the Host row alone (a warm-up, then ``--deliveries``) in a process of
its own, with no statement counting and nothing run before it, and prints its ms and CPU ms
per step: run it alternately from two checkouts (``PYTHONPATH=DIR``) for a before/after.
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
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from psycopg import sql
from psycopg.rows import dict_row

from runner import migrate_postgres

SETTINGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
"""The raw side's connection, as LangGraph's ``AsyncPostgresSaver.from_conn_string`` opens it
(every statement prepared on first use)."""


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


class Statements:
    """Counts the SQL statements this process sends through psycopg (a row of executemany: one).

    Patched onto psycopg's cursors for the whole run; each row reads the count
    over its own measured span (``statements/step``). DBOS goes through
    SQLAlchemy on psycopg, so its statements are counted the same way.
    """

    sent = 0

    @classmethod
    def install(cls) -> None:
        for klass in (psycopg.Cursor, psycopg.AsyncCursor):
            execute, executemany = klass.execute, klass.executemany

            def counted(self: Any, *a: Any, _call: Any = execute, **k: Any) -> Any:
                cls.sent += 1
                return _call(self, *a, **k)

            def counted_many(
                self: Any, query: Any, params: Any, *a: Any, _call: Any = executemany, **k: Any
            ) -> Any:
                params = list(params)
                cls.sent += len(params)
                return _call(self, query, params, *a, **k)

            klass.execute = counted  # type: ignore[method-assign]
            klass.executemany = counted_many  # type: ignore[method-assign]


def row(
    name: str,
    deliveries: int,
    steps: int,
    wall: float,
    cpu: float,
    lat: list[float],
    statements: int | None = None,
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
        "stmts/step": (statements or 0) / (deliveries * steps),
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
        c0, t0, s0 = time.process_time(), time.perf_counter(), Statements.sent
        for d in range(deliveries):
            cfg: Any = {"configurable": {"thread_id": f"raw-{tag}-{d}"}}
            await graph.ainvoke({"n": 0}, cfg, durability="sync")
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    sent = Statements.sent - s0
    return row("raw-langgraph", deliveries, steps, wall, cpu, timer.latencies, sent)


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

    s0 = Statements.sent
    try:
        wall, cpu = asyncio.run(drive())
    finally:
        runner.close()
    sent = Statements.sent - s0
    return row("host", deliveries, steps, wall, cpu, timer.latencies, sent)


async def raw_chain(url: str, steps: int, thread: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, **SETTINGS) as conn:
        graph = chain(steps, AsyncPostgresSaver(conn))
        await graph.ainvoke({"n": 0}, {"configurable": {"thread_id": thread}}, durability="sync")


def chain_storage(url: str, lengths: list[int]) -> None:
    """The storage table of ``--chains``: bytes per step of long chains, Host and raw."""
    from bench.scale_bench import run_chain

    print(f"Storage of one chain of N steps, PostgreSQL at {url.split('@')[-1]} (all tables)")
    print("    steps | host run s | host bytes/step | its checkpoints | raw bytes/step")
    for n in lengths:
        with tempfile.TemporaryDirectory(prefix="fleet-chain-") as scratch:
            before, points = table_bytes(url, "public.%"), _checkpoint_bytes(url)
            took = run_chain(Path(scratch), n, ["--store", url])
            if took is None:
                continue
            host, held = table_bytes(url, "public.%") - before, _checkpoint_bytes(url) - points
        before = table_bytes(url, "public.%")
        asyncio.run(raw_chain(url, n, f"raw-chain-{n}-{time.time_ns()}"))
        raw = table_bytes(url, "public.%") - before
        per = (host / n, held / n, raw / n)
        print(f"{n:>9,} | {took:>10.1f} | {per[0]:>15,.0f} | {per[1]:>15,.0f} | {per[2]:>14,.0f}")


def _checkpoint_bytes(url: str) -> int:
    return table_bytes(url, "public.checkpoint%") + table_bytes(
        url, "public.execsys_checkpoint_bodies"
    )


def dbos_url(url: str) -> str:
    """The DBOS side's database: the store's server, the store's database name plus ``_dbos``."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "_dbos"))


def ensure_database(url: str, admin_url: str) -> None:
    """Create the database ``url`` names (through a connection to ``admin_url``) if missing."""
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if found is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def run_dbos(url: str, admin_url: str, deliveries: int, steps: int) -> dict[str, Any] | None:
    """The DBOS row, its system tables in the database ``url`` names; None without DBOS."""
    try:
        from dbos import DBOS
    except ImportError:
        return None
    ensure_database(url, admin_url)
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
        c0, t0, s0 = time.process_time(), time.perf_counter(), Statements.sent
        for _ in range(deliveries):
            assert workflow() == steps
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        sent = Statements.sent - s0
    finally:
        DBOS.destroy()
    return row("dbos", deliveries, steps, wall, cpu, latencies, sent)


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
    parser.add_argument(
        "--dbos-store", help="the DBOS side's database (default: the --store name + '_dbos')"
    )
    parser.add_argument("--fleet-processes", default="1,2,4")
    parser.add_argument("--fleet-deliveries", type=int, default=30)
    parser.add_argument("--fleet-concurrency", type=int, default=1)
    parser.add_argument("--fleet-only", action="store_true")
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--host-only", action="store_true", help="the Host row alone")
    parser.add_argument("--chains", help="only the storage of chains of these lengths: 250,500")
    parser.add_argument(
        "--long-steps", type=int, help="the marginal table's longer deliveries (3 x --steps)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="the marginal table's rounds")
    parser.add_argument("--marginal-only", action="store_true", help="only the marginal table")
    args = parser.parse_args()
    if not args.store:
        parser.error("--store postgresql://... (or EXECSYS_BENCH_POSTGRES) is required")
    url = args.store
    migrate_postgres(url)
    if args.chains:
        chain_storage(url, [int(x) for x in args.chains.split(",") if x])
        return
    if args.host_only:
        folder = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
        run_host(url, 3, args.steps, folder)
        measured = run_host(url, args.deliveries, args.steps, folder)
        cpu = measured["ms/step"] * measured["cpu %"] / 100
        code = Path(__file__).resolve().parent.parent
        print(f"host: {measured['ms/step']:.2f} ms/step, {cpu:.2f} CPU ms/step (code of {code})")
        return
    folder = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    if not args.fleet_only:  # first: the statement counter below slows every statement
        _marginal(url, folder, args)
    if args.marginal_only:
        return
    Statements.install()
    n, steps = args.deliveries, args.steps
    rows: list[dict[str, Any]] = []
    sizes: dict[str, list[tuple[int, int]]] = {}
    tag = str(int(time.time()))

    def raw(count: int, suffix: str) -> dict[str, Any]:
        return asyncio.run(run_raw(url, count, steps, tag + suffix))

    def host(count: int, suffix: str) -> dict[str, Any]:
        return run_host(url, count, steps, folder)

    for label, side in () if args.fleet_only else (("raw-langgraph", raw), ("host", host)):
        side(3, "w")  # warm-up: imports, compile, first-use caches
        before = table_bytes(url, "public.%")
        rows.append(side(n, ""))
        half = table_bytes(url, "public.%")
        side(n, "b")
        sizes[label] = [
            (n * steps, half - before),
            (2 * n * steps, table_bytes(url, "public.%") - before),
        ]
    dbos_note = None
    if not args.no_dbos and not args.fleet_only:
        got = run_dbos(args.dbos_store or dbos_url(url), url, n, steps)
        if got is None:
            dbos_note = "DBOS: not installed (.venv/bin/pip install -e '.[bench]')"
        else:
            rows.append(got)
    where = f"PostgreSQL at {url.split('@')[-1]}, {os.cpu_count()} cores"
    if rows:
        print(f"{n} deliveries x {steps} steps each, one process, {where}")
        _table(rows)
        if dbos_note:
            print(dbos_note)
        _peer_ratios({r["system"]: r for r in rows})
        _sizes(sizes)
        delays = fence_delay(url, 0.2, 20, folder)
        print(
            f"lease expiry -> stale writer fenced: p50 {statistics.median(delays) * 1000:.1f} ms, "
            f"max {max(delays) * 1000:.1f} ms over {len(delays)} (the taker polls every 10 ms)"
        )
    fleet = _fleet_rows(url, folder, args, steps)
    print(
        f"{args.fleet_deliveries} queued deliveries x {steps} steps, N 'execsys serve' processes "
        f"(--concurrency {args.fleet_concurrency}), {where}"
    )
    _table(fleet)
    by = {r["system"]: r for r in fleet}
    if "serve x1" in by and "serve x2" in by:
        ratio = by["serve x2"]["deliveries/s"] / by["serve x1"]["deliveries/s"]
        print(f"2 processes / 1 process: {ratio:.2f}x deliveries/s (target >= 1.5x)")


def _marginal(url: str, folder: Path, args: argparse.Namespace) -> None:
    from bench._fleet_marginal import marginal_rows, print_marginal

    long = args.long_steps or 3 * args.steps
    rows = marginal_rows(url, folder, args.deliveries, args.steps, long, args.rounds)
    print_marginal(rows, args.deliveries, args.rounds)


def _fleet_rows(url: str, folder: Path, args: argparse.Namespace, steps: int) -> list[Any]:
    from bench._fleet_serve import fleet_round

    rows = []
    for text in args.fleet_processes.split(","):
        processes = int(text)
        rows.append(
            fleet_round(
                url,
                folder / f"fleet-{processes}",
                processes,
                args.fleet_deliveries,
                steps,
                args.fleet_concurrency,
            )
        )
    if args.profile:  # an extra round, not in the table: the profile slows its runner
        fleet_round(
            url, folder / "profiled", 1, args.fleet_deliveries, steps, 1, profile=args.profile
        )
        print(f"profile of one runner (CPU time) written to {args.profile}")
    return rows


def _table(rows: list[dict[str, Any]]) -> None:
    print(" | ".join(f"{k:>14}" for k in rows[0]))
    for r in rows:
        print(" | ".join(f"{v:>14.2f}" if isinstance(v, float) else f"{v:>14}" for v in r.values()))


def _peer_ratios(by: dict[str, dict[str, Any]]) -> None:
    ratio = by["host"]["ms/step"] / by["raw-langgraph"]["ms/step"]
    print(f"host per-step cost / raw LangGraph: {ratio:.2f}x (target <= 1.3x)")
    cpu = {k: by[k]["ms/step"] * by[k]["cpu %"] / 100 for k in ("host", "raw-langgraph")}
    print(
        f"  CPU ms per step: host {cpu['host']:.2f}, raw {cpu['raw-langgraph']:.2f} "
        f"({cpu['host'] / cpu['raw-langgraph']:.2f}x); the rest of each step waits on the server"
    )
    if "dbos" in by:
        print(
            f"host steps/s / DBOS steps/s: "
            f"{by['host']['steps/s'] / by['dbos']['steps/s']:.2f}x (target >= 1x)"
        )


def _sizes(sizes: dict[str, list[tuple[int, int]]]) -> None:
    for label, points in sizes.items():
        per = [b * 1000 / s for s, b in points]
        print(
            f"{label}: bytes per 1,000 steps at {points[0][0]} steps {per[0]:,.0f}, "
            f"at {points[1][0]} steps {per[1]:,.0f} (total tables incl. indexes)"
        )


if __name__ == "__main__":
    main()
