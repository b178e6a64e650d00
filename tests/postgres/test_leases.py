"""Lease rows on PostgreSQL, through the Host's lease manager: row locks, tokens, processes."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from contracts import ErrorCode, ExecsysError
from host._lease import LeaseManager, check_token
from host.storage.postgres import PostgresStorage, fenced_token, migrate


@contextlib.contextmanager
def _writer_and_taker(
    pg_url: str, tmp_path: Path
) -> Iterator[tuple[PostgresStorage, LeaseManager, LeaseManager]]:
    """A writer whose lease expires at once, and a rival on a store of its own."""
    migrate(pg_url)
    writer_store, taker_store = PostgresStorage.open(pg_url), PostgresStorage.open(pg_url)
    try:
        writer = LeaseManager(writer_store, tmp_path / "a", "host-a:1:a", ttl_s=0.05)
        taker = LeaseManager(taker_store, tmp_path / "b", "host-b:2:b", ttl_s=30)
        yield writer_store, writer, taker
    finally:
        writer_store.close()
        taker_store.close()


def test_a_grant_waits_for_a_write_in_flight_then_the_old_token_is_refused(
    pg_url: str, tmp_path: Path
) -> None:
    """FOR SHARE (the write) against FOR UPDATE (the grant): they take turns on the row."""
    with _writer_and_taker(pg_url, tmp_path) as (writer_store, writer, taker):
        token = writer.acquire("d")
        time.sleep(0.1)  # the writer's lease has expired; nobody took it yet
        granted: list[int] = []
        with writer_store.transaction() as tx:
            check_token(tx, "d", token)  # still the current token: the write may go on
            thread = threading.Thread(target=lambda: granted.append(taker.acquire("d", wait_s=5)))
            thread.start()
            time.sleep(0.3)
            assert granted == [], "the grant must wait for the write holding the row"
            tx.request_stop("d", 0.0, "writer")
        thread.join(timeout=10)
        assert granted == [token + 1]
        with pytest.raises(ExecsysError) as caught, writer_store.transaction() as tx:  # noqa: PT012
            check_token(tx, "d", token)
            tx.request_stop("d", 1.0, "late writer")
        assert caught.value.code is ErrorCode.LEASE_FENCED
        assert writer_store.stop_request("d") == "writer"


def test_a_step_write_with_a_stale_token_keeps_nothing(pg_url: str, tmp_path: Path) -> None:
    """The fencing check sent with a step's writes (no answer awaited) refuses the whole commit."""
    with _writer_and_taker(pg_url, tmp_path) as (writer_store, writer, taker):
        token = writer.acquire("p")
        with writer_store.step_transaction() as tx:
            tx.fence("p", token)
            tx.request_stop("p", 0.0, "writer")
        assert writer_store.stop_request("p") == "writer", "the current token's write is kept"
        time.sleep(0.1)
        assert taker.acquire("p", wait_s=5) == token + 1
        with pytest.raises(psycopg.Error) as caught, writer_store.step_transaction() as tx:  # noqa: PT012
            tx.fence("p", token)
            tx.clear_stop("p")
            tx.request_stop("p", 1.0, "late writer")
        assert fenced_token(caught.value) == str(token + 1), "the refusal names the current token"
        assert writer_store.stop_request("p") == "writer", "nothing of the refused commit is kept"
        with pytest.raises(psycopg.Error) as unknown, writer_store.step_transaction() as tx:
            tx.fence("never-granted", 1)
        assert fenced_token(unknown.value) == ""


RACER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from contracts import ExecsysError
    from host._lease import LeaseManager
    from host.storage.postgres import PostgresStorage

    url, name, rounds, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    store = PostgresStorage.open(url)
    leases = LeaseManager(store, folder, f"elsewhere-{name}:1:{name}", ttl_s=60)
    won = []
    for i in range(rounds):
        try:
            leases.acquire(f"d{i}")
            won.append(i)
        except ExecsysError:
            pass
    print(" ".join(map(str, won)))
    store.close()
    """
)


@pytest.mark.slow
def test_racing_processes_never_both_hold_a_delivery(pg_url: str, tmp_path: Path) -> None:
    migrate(pg_url)
    rounds = 200
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, pg_url, name, str(rounds), str(tmp_path / name)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b", "c")
    ]
    won = [set(map(int, p.communicate(timeout=300)[0].split())) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert won[0] | won[1] | won[2] == set(range(rounds))
    assert sum(len(w) for w in won) == rounds  # exactly one winner per delivery
    with psycopg.connect(pg_url, row_factory=dict_row) as conn:
        tokens = conn.execute("SELECT DISTINCT token FROM execsys_leases").fetchall()
    assert [r["token"] for r in tokens] == [1]


@pytest.mark.parametrize("taken_before", [False, True], ids=["first-grant", "takeover"])
def test_grants_released_together_by_a_barrier_have_one_winner_each_round(
    pg_url: str, tmp_path: Path, taken_before: bool
) -> None:
    """Three managers, each on its own connections, grant the same delivery at the same instant.

    Either no one held it yet, or an earlier holder's lease has just expired.
    """
    migrate(pg_url)
    rounds, names = 60, ("a", "b", "c")
    expected_token = 1
    if taken_before:
        seed_store = PostgresStorage.open(pg_url)
        seed = LeaseManager(seed_store, tmp_path / "seed", "elsewhere-s:1:s", ttl_s=0.001)
        for i in range(rounds):
            seed.acquire(f"d{i}")
        seed_store.close()
        expected_token = 2
        time.sleep(0.05)
    stores = [PostgresStorage.open(pg_url) for _ in names]
    managers = [
        LeaseManager(store, tmp_path / n, f"elsewhere-{n}:1:{n}", ttl_s=60)
        for store, n in zip(stores, names, strict=True)
    ]
    barrier = threading.Barrier(len(names))
    won: dict[str, list[int]] = {n: [] for n in names}
    refused: list[ErrorCode] = []

    def race(name: str, leases: LeaseManager) -> None:
        for i in range(rounds):
            barrier.wait(timeout=30)
            try:
                won[name].append(leases.acquire(f"d{i}"))
            except ExecsysError as exc:
                refused.append(exc.code)

    threads = [
        threading.Thread(target=race, args=(n, m)) for n, m in zip(names, managers, strict=True)
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        for store in stores:
            store.close()
    assert sum(len(w) for w in won.values()) == rounds, won
    assert all(token == expected_token for w in won.values() for token in w)
    assert set(refused) == {ErrorCode.LEASE_HELD}
