"""A step's statement prepared once per connection (decision 0153), and the way back to text."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import DictRow

from contracts import LangGraphHostConfig
from host.storage.postgres import PostgresStorage, _batch, migrate
from host.storage.postgres._batch import StepCursor
from host.storage.postgres._connect import SETTINGS
from runner import RunnerFactory
from tests.host.harness import ScriptInvoker, looping_graph, make_delivery
from tests.support.memory_custody import MemoryCustody


@pytest.fixture(autouse=True)
def _nothing_sent_before() -> None:
    """Each test starts as a new process would: no statement text sent yet."""
    _batch._SENT.clear()


def _prepared(conn: psycopg.Connection[DictRow]) -> list[str]:
    rows = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
    return [row["statement"] for row in rows]


def _every_connection(store: PostgresStorage) -> list[psycopg.Connection[DictRow]]:
    """Every connection of an idle store's pool, taken out (give them back with putconn)."""
    size = store.pool.get_stats()["pool_size"]
    return [store.pool.getconn() for _ in range(size)]


def _stop_request(conn: psycopg.Connection[DictRow], actor: str) -> StepCursor:
    """One step statement on ``conn`` that records a stop request by ``actor``."""
    step = StepCursor(conn, prepare=True)
    step.execute(
        "INSERT INTO execsys_leases (delivery, holder, token, expires) VALUES (%s, %s, 0, 0) "
        "ON CONFLICT DO NOTHING",
        ("d", "nobody"),
    )
    step.execute(
        "INSERT INTO execsys_stops (delivery, requested, actor) VALUES (%s, %s, %s) "
        "ON CONFLICT (delivery) DO UPDATE SET actor = excluded.actor",
        ("d", 1.0, actor),
    )
    step.finish()
    assert step.cur is None, "sent as one statement"
    return step


def _actor(conn: psycopg.Connection[DictRow]) -> str:
    row = conn.execute("SELECT actor FROM execsys_stops WHERE delivery = 'd'").fetchone()
    assert row is not None
    return str(row["actor"])


def test_a_statement_is_prepared_the_second_time_it_is_sent(pg_url: str) -> None:
    migrate(pg_url)
    with psycopg.Connection.connect(pg_url, **SETTINGS) as conn:
        _stop_request(conn, "first")
        assert _actor(conn) == "first" and _prepared(conn) == [], "first use goes as text"
        _stop_request(conn, "second")
        assert len(_prepared(conn)) == 1, "the repeated text is prepared"
        _stop_request(conn, "third")
        assert _actor(conn) == "third" and len(_prepared(conn)) == 1, "and reused"
        nothing = StepCursor(conn, prepare=True)
        nothing.finish()  # an empty body sends nothing
        assert len(_prepared(conn)) == 1


def test_a_server_connection_that_lost_its_statement_gets_the_text(pg_url: str) -> None:
    """A transaction pooler hands the session to another server connection: 26000."""
    migrate(pg_url)
    with psycopg.Connection.connect(pg_url, **SETTINGS) as conn:
        _stop_request(conn, "one")
        _stop_request(conn, "one")
        assert len(_prepared(conn)) == 1
        conn.pgconn.exec_(b"DEALLOCATE ALL")  # behind psycopg's back, as a pooler would
        step = _stop_request(conn, "after the switch")
        assert step.prepare is False, "the caller is told to stop preparing"
        assert _actor(conn) == "after the switch", "the statement was applied once, as text"


def test_a_name_taken_on_the_server_connection_gets_the_text(pg_url: str) -> None:
    """Another client's statement of the same name on a pooled server connection: 42P05."""
    migrate(pg_url)
    with psycopg.Connection.connect(pg_url, **SETTINGS) as conn:
        conn.pgconn.exec_(b"PREPARE _pg3_0 AS SELECT 1")
        _stop_request(conn, "taken")
        step = _stop_request(conn, "taken")
        assert step.prepare is False
        assert _actor(conn) == "taken"
        assert _prepared(conn) == ["PREPARE _pg3_0 AS SELECT 1"]


def test_the_store_stops_preparing_once_the_server_loses_a_statement(pg_url: str) -> None:
    migrate(pg_url)
    store = PostgresStorage.open(pg_url)
    try:
        assert store.prepare is True
        for actor in ("a", "a"):
            with store.step_transaction() as tx:
                tx.request_stop("d", 1.0, actor)
        taken = _every_connection(store)
        for conn in taken:
            conn.pgconn.exec_(b"DEALLOCATE ALL")
            store.pool.putconn(conn)
        for _ in range(len(taken) + 1):  # the pool hands its connections out in turn
            with store.step_transaction() as tx:
                tx.request_stop("d", 1.0, "a")
        assert store.prepare is False
    finally:
        store.close()


def test_a_run_with_preparing_off_prepares_nothing(pg_url: str, tmp_path: Path) -> None:
    doc, behaviour = looping_graph(4)

    def run(url: str, nonce: str) -> list[str]:
        config = LangGraphHostConfig(engine="langgraph", store=url, data_dir=str(tmp_path))
        runner = RunnerFactory(config).create(
            custody=MemoryCustody(), invoker=ScriptInvoker({"step": behaviour})
        )
        try:
            report = asyncio.run(runner.host.run(make_delivery(doc, None, nonce=nonce)))
            assert report.status == "completed"
            store: PostgresStorage = runner.host.store  # type: ignore[attr-defined]
            taken = _every_connection(store)
            found = [text for conn in taken for text in _prepared(conn)]
            for conn in taken:
                store.pool.putconn(conn)
            return found
        finally:
            runner.close()

    assert run(pg_url + "?execsys_prepare=off", "off") == []
    assert any(text.startswith("WITH s0 AS") for text in run(pg_url, "on")), "on by default"
