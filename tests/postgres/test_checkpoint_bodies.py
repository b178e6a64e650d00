"""Checkpoints on PostgreSQL stored as bodies, whole or as deltas (decision 0155).

Ground truth is what LangGraph handed the saver: every checkpoint written is
recorded as it was passed in, and every stored row must read back as exactly
that, in the writing process and in a fresh saver that never saw it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.postgres import PostgresSaver

from contracts import ErrorCode, ExecsysError, LangGraphHostConfig
from host.langgraph._delta import PREFIX
from runner import RunnerFactory
from tests.host.harness import ScriptInvoker, make_delivery
from tests.host.test_checkpoint_deltas import _chain, _ok, asking_chain, recorded
from tests.support.memory_custody import MemoryCustody


def _runner(pg_url: str, tmp_path: Path, behaviours: dict[str, Any], custody: Any = None) -> Any:
    config = LangGraphHostConfig(engine="langgraph", store=pg_url, data_dir=str(tmp_path))
    return RunnerFactory(config).create(
        custody=custody or MemoryCustody(), invoker=ScriptInvoker(behaviours)
    )


def _bodies(pg_url: str, thread: str) -> list[tuple[str, str, int]]:
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT checkpoint_id, type, length(body) FROM execsys_checkpoint_bodies "
            "WHERE thread_id = %s AND checkpoint_ns = '' ORDER BY checkpoint_id",
            (thread,),
        ).fetchall()
    return [(str(i), str(t), int(n)) for i, t, n in rows]


def _config(thread: str, checkpoint: str | None = None) -> Any:
    configurable = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint is not None:
        configurable["checkpoint_id"] = checkpoint
    return {"configurable": configurable}


def test_a_long_chain_stores_deltas_that_read_back_exactly(pg_url: str, tmp_path: Path) -> None:
    runner = _runner(pg_url, tmp_path / "w", {"step": _ok})
    saver = runner.host.substrate.saver
    written = recorded(saver.codec)
    delivery = make_delivery(_chain(90))
    try:
        assert asyncio.run(runner.host.run(delivery)).status.value == "completed"
    finally:
        runner.close()
    thread = delivery.delivery_id
    bodies = _bodies(pg_url, thread)
    assert [b[0] for b in bodies] == sorted(written) and len(bodies) > 90
    deltas = [b for b in bodies if b[1].startswith(PREFIX)]
    assert 0 < len(bodies) - len(deltas) < len(bodies) // 2, "mostly deltas, some full copies"
    with psycopg.connect(pg_url) as conn:
        blobs = conn.execute(
            "SELECT count(*) FROM checkpoint_blobs WHERE thread_id = %s", (thread,)
        )
        assert blobs.fetchone() == (0,), "no channel is stored outside the body"
        rows = conn.execute(
            "SELECT checkpoint FROM checkpoints WHERE thread_id = %s", (thread,)
        ).fetchall()
        assert all(set(row[0]) == {"v", "id", "ts"} for row in rows), "the row names, not holds"
    cold = _runner(pg_url, tmp_path / "r", {"step": _ok})
    try:
        reader = cold.host.substrate.saver
        listed = {t.checkpoint["id"]: t.checkpoint for t in reader.list(_config(thread))}
        assert listed == written
        for checkpoint_id in list(written)[::7]:
            got = reader.get_tuple(_config(thread, checkpoint_id))
            assert got is not None and got.checkpoint == written[checkpoint_id]
        latest = reader.get_tuple(_config(thread))
        assert latest is not None and latest.checkpoint == written[max(written)]
    finally:
        cold.close()


def test_a_fresh_runner_continues_a_suspended_delta_stored_thread(
    pg_url: str, tmp_path: Path
) -> None:
    doc, ask_once = asking_chain()
    delivery = make_delivery(doc)
    custody = MemoryCustody()
    first = _runner(pg_url, tmp_path / "a", {"step": _ok, "ask": ask_once}, custody)
    try:
        assert asyncio.run(first.host.run(delivery)).status.value == "suspended"
    finally:
        first.close()
    second = _runner(pg_url, tmp_path / "b", {"step": _ok, "ask": ask_once}, custody)
    try:
        report = second.host.status(delivery.delivery_id)
        assert report.suspension is not None
        correlation = report.suspension.correlation
        done = asyncio.run(second.host.answer(delivery.delivery_id, correlation, {"go": True}))
        assert done.status.value == "completed"
    finally:
        second.close()


def test_a_thread_stored_in_the_stock_layout_reads_and_continues(
    pg_url: str, tmp_path: Path
) -> None:
    """A delivery suspended before decision 0155 (no bodies) is answered after it."""
    doc, ask_once = asking_chain()
    delivery = make_delivery(doc)
    thread = delivery.delivery_id
    custody = MemoryCustody()
    first = _runner(pg_url, tmp_path / "a", {"step": _ok, "ask": ask_once}, custody)
    try:
        assert asyncio.run(first.host.run(delivery)).status.value == "suspended"
        before = list(first.host.substrate.saver.list(_config(thread)))
    finally:
        first.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM execsys_checkpoint_bodies WHERE thread_id = %s", (thread,))
        stock = PostgresSaver(conn)  # type: ignore[arg-type]
        for saved in reversed(before):
            parent = saved.parent_config or _config(thread)
            versions = saved.checkpoint["channel_versions"]
            stock.put(parent, saved.checkpoint, saved.metadata, versions)
    second = _runner(pg_url, tmp_path / "b", {"step": _ok, "ask": ask_once}, custody)
    try:
        reader = second.host.substrate.saver
        assert [t.checkpoint for t in reader.list(_config(thread))] == [
            t.checkpoint for t in before
        ]
        report = second.host.status(thread)
        assert report.suspension is not None
        correlation = report.suspension.correlation
        done = asyncio.run(second.host.answer(thread, correlation, {"go": True}))
        assert done.status.value == "completed"
    finally:
        second.close()
    bodies = _bodies(pg_url, thread)
    assert bodies and not bodies[0][1].startswith(PREFIX), "the first body after is whole"


def test_a_missing_parent_is_a_coded_error(pg_url: str, tmp_path: Path) -> None:
    runner = _runner(pg_url, tmp_path / "w", {"step": _ok})
    delivery = make_delivery(_chain(20))
    try:
        asyncio.run(runner.host.run(delivery))
    finally:
        runner.close()
    bodies = _bodies(pg_url, delivery.delivery_id)
    last = next(b for b in reversed(bodies) if b[1].startswith(PREFIX))
    with psycopg.connect(pg_url) as conn:
        conn.execute(
            "DELETE FROM execsys_checkpoint_bodies WHERE thread_id = %s AND checkpoint_id != %s",
            (delivery.delivery_id, last[0]),
        )
    cold = _runner(pg_url, tmp_path / "r", {"step": _ok})
    try:
        with pytest.raises(ExecsysError) as caught:
            cold.host.substrate.saver.get_tuple(_config(delivery.delivery_id, last[0]))
        assert caught.value.code is ErrorCode.STORE_UNREADABLE
    finally:
        cold.close()


def test_retirement_deletes_the_bodies(pg_url: str, tmp_path: Path) -> None:
    runner = _runner(pg_url, tmp_path, {"step": _ok})
    delivery = make_delivery(_chain(5))
    try:
        assert asyncio.run(runner.host.run(delivery)).status.value == "completed"
        assert _bodies(pg_url, delivery.delivery_id)
        asyncio.run(runner.host.retire(delivery.delivery_id, "auth-1"))
    finally:
        runner.close()
    assert _bodies(pg_url, delivery.delivery_id) == []
