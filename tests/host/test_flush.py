"""Which checkpoint commits skip the durability flush (decision 0154).

Only a step that routes: the run's own loop, nothing recorded, work still
scheduled. Every commit that keeps a journal event or a record flushes, and the
delivery ends the same either way. Run against the SQLite store here and the
PostgreSQL store in ``tests/postgres/test_flush_pg.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from contracts import LangGraphHostConfig
from host._step_rows import needs_flush
from runner import RunnerFactory
from tests.host.harness import ScriptInvoker, ask_once, asking_graph, make_delivery
from tests.support.memory_custody import MemoryCustody


@pytest.mark.parametrize(
    ("source", "outbox", "more", "flush"),
    [
        ("loop", None, True, False),  # a step that only routes
        ("loop", [], True, False),
        ("input", None, True, True),  # the input that starts a run (an answer, a directive)
        ("loop", [{"type": "event"}], True, True),  # something happened: kept durably
        ("loop", None, False, True),  # nothing scheduled after it: the run's last word
        ("update", None, True, True),
        (None, None, True, True),
    ],
)
def test_only_a_routing_step_skips_the_flush(
    source: Any, outbox: Any, more: bool, flush: bool
) -> None:
    assert needs_flush(source, outbox, more) is flush


def commits_of_an_asked_and_answered_delivery(
    store_url: str, folder: Path
) -> list[tuple[bool, int]]:
    """(flushed, journal lines kept) of every checkpoint commit of a run, an answer and the end."""
    config = LangGraphHostConfig(engine="langgraph", store=store_url, data_dir=str(folder))
    runner = RunnerFactory(config).create(
        custody=MemoryCustody(), invoker=ScriptInvoker({"ask": ask_once})
    )
    host: Any = runner.host
    store = host.store
    seen: list[tuple[bool, int]] = []
    opened = {"transaction": store.transaction, "fenced_transaction": store.fenced_transaction}

    def watching(name: str) -> Any:
        @contextmanager
        def watched(*args: Any, flush: bool = True) -> Iterator[Any]:
            with opened[name](*args, flush=flush) as tx:
                lines = [0]
                append = tx.append_journal

                def counted(delivery: str, rows: Any) -> None:
                    rows = list(rows)
                    lines[0] += len(rows)
                    append(delivery, rows)

                tx.append_journal = counted
                yield tx
            seen.append((flush, lines[0]))

        return watched

    store.transaction = watching("transaction")
    store.fenced_transaction = watching("fenced_transaction")
    delivery = make_delivery(asking_graph())
    try:
        asked = asyncio.run(host.run(delivery))
        assert asked.status == "suspended"
        done = asyncio.run(host.answer(delivery.delivery_id, asked.suspension.correlation, "yes"))
        assert done.status == "completed"
    finally:
        runner.close()
    return seen


def check_commits(seen: list[tuple[bool, int]]) -> None:
    unflushed = [lines for flushed, lines in seen if not flushed]
    assert unflushed, "the step that hands the answer to its node skips the flush"
    assert all(lines == 0 for lines in unflushed), "no commit that keeps an event skips it"
    assert any(flushed and lines for flushed, lines in seen), "the turns' commits flush"


def test_a_run_and_an_answer_flush_every_commit_that_keeps_an_event(tmp_path: Path) -> None:
    check_commits(commits_of_an_asked_and_answered_delivery(f"sqlite:///{tmp_path}/s.db", tmp_path))


def test_an_unflushed_sqlite_commit_is_the_one_transaction_without_fsync(tmp_path: Path) -> None:
    from host.storage.sqlite import SqliteStorage

    store = SqliteStorage.open(tmp_path / "s.db")
    try:
        store.setup()

        def synchronous() -> int:
            return int(store.conn.execute("PRAGMA synchronous").fetchone()[0])

        full = synchronous()
        assert full == 2, "commits fsync by default (FULL)"
        with store.transaction(flush=False) as tx:
            assert synchronous() == 1, "NORMAL: the WAL is not fsynced at this commit"
            tx.request_stop("d", 1.0, "kept")
        assert synchronous() == full, "the next transaction flushes again"
        with store.transaction() as tx:
            assert synchronous() == full
    finally:
        store.close()
