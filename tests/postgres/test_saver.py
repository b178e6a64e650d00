"""The fenced PostgreSQL saver: the Host's rows commit with the checkpoint, or not at all."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from contracts import ErrorCode, ExecsysError
from host.langgraph._pg_saver import FencedPostgresSaver
from host.storage.postgres import aconnect, grant, migrate
from runner import migrate_postgres

STEPS = 10


class State(TypedDict):
    n: int
    seen: Annotated[list[int], operator.add]


def graph(saver: FencedPostgresSaver, calls: list[int] | None = None) -> Any:
    builder: StateGraph[State] = StateGraph(State)

    def make(i: int) -> Any:
        def step(state: State) -> dict[str, Any]:
            if calls is not None:
                calls.append(i)
            return {"n": state["n"] + 1, "seen": [i]}

        return step

    for i in range(STEPS):
        builder.add_node(f"s{i}", make(i))
        builder.add_edge(START if i == 0 else f"s{i - 1}", f"s{i}")
    builder.add_edge(f"s{STEPS - 1}", END)
    return builder.compile(checkpointer=saver)


async def journal_hook(
    cur: Any, thread: str, checkpoint: Any, metadata: Any, versions: Any
) -> None:
    step = int(metadata.get("step", -1))
    await cur.execute(
        "INSERT INTO execsys_journal (delivery, ordinal, digest, line) VALUES (%s, %s, %s, %s)",
        (thread, step + 1, checkpoint["id"], b"{}"),
    )


def rows(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        return list(conn.execute(sql.encode(), params).fetchall())


def pool(url: str) -> AsyncConnectionPool[Any]:
    return AsyncConnectionPool(
        url,
        min_size=1,
        max_size=4,
        open=False,
        kwargs={"autocommit": True, "prepare_threshold": None, "row_factory": dict_row},
    )


async def leased(url: str, thread: str, holder: str, ttl: float = 30.0) -> int:
    conn = await aconnect(url)
    try:
        token = await grant(conn, thread, holder, ttl)
    finally:
        await conn.close()
    assert token is not None
    return token


def test_every_checkpoint_commits_with_its_journal_row(pg_url: str) -> None:
    migrate_postgres(pg_url)

    async def main() -> None:
        async with pool(pg_url) as p:
            saver = FencedPostgresSaver(p, on_put=journal_hook)
            saver.tokens["t1"] = await leased(pg_url, "t1", "a")
            out = await graph(saver).ainvoke(
                {"n": 0, "seen": []}, {"configurable": {"thread_id": "t1"}}
            )
            assert out["n"] == STEPS
            assert out["seen"] == list(range(STEPS))

    asyncio.run(main())
    checkpoints = rows(pg_url, "SELECT checkpoint_id FROM checkpoints WHERE thread_id = 't1'")
    journal = rows(pg_url, "SELECT digest FROM execsys_journal WHERE delivery = 't1'")
    assert len(checkpoints) == STEPS + 2  # input, one per step, and the first empty one
    assert sorted(r["checkpoint_id"] for r in checkpoints) == sorted(r["digest"] for r in journal)


def test_a_write_without_the_current_token_applies_nothing(pg_url: str) -> None:
    migrate_postgres(pg_url)

    async def main() -> None:
        async with pool(pg_url) as p:
            stale = FencedPostgresSaver(p, on_put=journal_hook)
            stale.tokens["t1"] = await leased(pg_url, "t1", "a", ttl=0.0)
            # The lease expired at once; another holder takes it, so the first is stale.
            fresh_token = await leased(pg_url, "t1", "b")
            assert fresh_token == stale.tokens["t1"] + 1
            with pytest.raises(ExecsysError) as caught:
                await graph(stale).ainvoke(
                    {"n": 0, "seen": []}, {"configurable": {"thread_id": "t1"}}
                )
            assert caught.value.code is ErrorCode.LEASE_FENCED
            unleased = FencedPostgresSaver(p, on_put=journal_hook)
            with pytest.raises(ExecsysError) as caught:
                await graph(unleased).ainvoke(
                    {"n": 0, "seen": []}, {"configurable": {"thread_id": "t2"}}
                )
            assert caught.value.code is ErrorCode.LEASE_FENCED

    asyncio.run(main())
    assert rows(pg_url, "SELECT 1 FROM checkpoints") == []
    assert rows(pg_url, "SELECT 1 FROM checkpoint_blobs") == []
    assert rows(pg_url, "SELECT 1 FROM execsys_journal") == []


def test_a_failing_hook_rolls_the_checkpoint_back(pg_url: str) -> None:
    migrate_postgres(pg_url)

    async def boom(cur: Any, thread: str, checkpoint: Any, metadata: Any, versions: Any) -> None:
        await journal_hook(cur, thread, checkpoint, metadata, versions)
        if int(metadata.get("step", -1)) == 3:
            raise RuntimeError("hook failed")

    async def main() -> None:
        async with pool(pg_url) as p:
            saver = FencedPostgresSaver(p, on_put=boom)
            saver.tokens["t1"] = await leased(pg_url, "t1", "a")
            with pytest.raises(RuntimeError):
                await graph(saver).ainvoke(
                    {"n": 0, "seen": []}, {"configurable": {"thread_id": "t1"}}
                )

    asyncio.run(main())
    steps = rows(pg_url, "SELECT (metadata->>'step')::int AS s FROM checkpoints ORDER BY 1")
    assert [r["s"] for r in steps] == [-1, 0, 1, 2]
    assert len(rows(pg_url, "SELECT 1 FROM execsys_journal")) == 4


def test_a_connection_killed_mid_commit_leaves_no_partial_step(pg_url: str) -> None:
    """pg_terminate_backend inside the step's transaction: the step is lost whole, then resumes."""
    migrate_postgres(pg_url)

    async def killer(cur: Any, thread: str, checkpoint: Any, metadata: Any, versions: Any) -> None:
        await journal_hook(cur, thread, checkpoint, metadata, versions)
        if int(metadata.get("step", -1)) == 5 and not killed:
            killed.append(True)
            pid = (await (await cur.execute("SELECT pg_backend_pid() AS p")).fetchone())["p"]
            with psycopg.connect(pg_url) as other:
                other.execute("SELECT pg_terminate_backend(%s)", (pid,))
            await cur.execute("SELECT 1")  # the server is gone from under this transaction

    killed: list[bool] = []
    calls: list[int] = []

    async def main() -> None:
        async with pool(pg_url) as p:
            saver = FencedPostgresSaver(p, on_put=killer)
            saver.tokens["t1"] = await leased(pg_url, "t1", "a")
            cfg: Any = {"configurable": {"thread_id": "t1"}}
            with pytest.raises(psycopg.OperationalError):
                await graph(saver, calls).ainvoke({"n": 0, "seen": []}, cfg, durability="sync")
            stored = rows(
                pg_url, "SELECT (metadata->>'step')::int AS s FROM checkpoints ORDER BY 1"
            )
            assert [r["s"] for r in stored] == [-1, 0, 1, 2, 3, 4]
            assert len(rows(pg_url, "SELECT 1 FROM execsys_journal")) == 6
            # The pool hands out a healthy connection; resuming re-runs only the lost step.
            out = await graph(saver, calls).ainvoke(None, cfg, durability="sync")
            assert out["seen"] == list(range(STEPS))

    asyncio.run(main())
    # Steps s0..s3 committed (checkpoints of steps 1..4) and never ran again; s4's commit was
    # the one killed, so s4 ran twice.
    assert calls == [*range(5), *range(4, STEPS)]
    assert len(rows(pg_url, "SELECT 1 FROM execsys_journal")) == STEPS + 2


def test_migrate_without_the_substrate_creates_only_host_tables(pg_url: str) -> None:
    assert migrate(pg_url) == (0, 2)
    names = {
        r["table_name"]
        for r in rows(
            pg_url, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        )
    }
    assert "execsys_leases" in names
    assert not any(n.startswith("checkpoint") for n in names)
