"""The store's pool: an idle connection is probed before reuse; a returned one is back at once."""

from __future__ import annotations

import time

import psycopg
import pytest
from psycopg.rows import DictRow

from host.storage.postgres import PostgresStorage, migrate
from host.storage.postgres import _storage as storage_module


def _pool_pids(store: PostgresStorage) -> set[int]:
    """The server pids of every connection of an idle store's pool (each used once)."""
    size = store.pool.get_stats()["pool_size"]
    taken: list[psycopg.Connection[DictRow]] = [store.pool.getconn() for _ in range(size)]
    pids = {conn.info.backend_pid for conn in taken}
    for conn in taken:
        store.pool.putconn(conn)
    return pids


def _terminate(pg_url: str, pids: set[int]) -> None:
    with psycopg.connect(pg_url, autocommit=True) as admin:
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_connection_whose_server_side_died_while_idle_is_replaced_before_use(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate(pg_url)
    store = PostgresStorage.open(pg_url)
    try:
        store.delivery("warm")
        pids = _pool_pids(store)
        _terminate(pg_url, pids)
        monkeypatch.setattr(storage_module, "IDLE_CHECK_S", 0.0)  # it has been idle long enough
        assert store.delivery("no-such-delivery") is None  # the read is not the one that fails
        assert not _pool_pids(store) & pids
    finally:
        store.close()


def test_a_connection_used_again_at_once_is_not_probed(pg_url: str) -> None:
    migrate(pg_url)
    store = PostgresStorage.open(pg_url)
    try:
        store.delivery("warm")
        _terminate(pg_url, _pool_pids(store))
        # Returned a moment ago: handed out as is, so the dead connection shows.
        with pytest.raises(psycopg.OperationalError), store.connection() as conn:
            conn.execute("SELECT 1")
    finally:
        store.close()


def test_a_returned_connection_is_back_in_the_pool_before_putconn_returns(pg_url: str) -> None:
    """No worker thread between a statement and the next one's connection (decision 0156)."""
    migrate(pg_url)
    store = PostgresStorage.open(pg_url)
    try:
        store.delivery("warm")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # connections the pool opened at start have landed
            stats = store.pool.get_stats()
            if stats["pool_available"] == stats["pool_size"] and not stats.get("connecting"):
                break
            time.sleep(0.05)
        for _ in range(50):
            with store.connection() as conn:
                conn.execute("SELECT 1")
            stats = store.pool.get_stats()
            assert stats["pool_available"] == stats["pool_size"]
    finally:
        store.close()
