"""A step's writes as one statement on PostgreSQL: whole or nothing, and a read falls back."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer

from contracts import LangGraphHostConfig
from host.langgraph._pg_saver import setup_checkpoint_tables
from host.storage.postgres import PostgresStorage, fenced_token, migrate
from host.storage.postgres._batch import FALLBACKS, NotCombinable, StatementBatch, StepCursor
from host.storage.postgres._tx import VALUES_MAX_ROWS
from runner import RunnerFactory
from tests.host.harness import ScriptInvoker, looping_graph, make_delivery
from tests.support.memory_custody import MemoryCustody


def test_statements_combine_into_one_with_their_own_lists_moved_up() -> None:
    batch = StatementBatch()
    batch.execute("SELECT execsys_fence(%s, %s)", ("d", 1))
    batch.execute(
        "WITH given AS (SELECT %b AS x) INSERT INTO t1 (x) SELECT x FROM given "
        "WHERE x::text LIKE '1%%'",
        ([1],),
    )
    batch.execute("UPDATE t2 SET y = %s", (5,))
    combined = batch.combined()
    assert combined is not None
    text, params = combined
    assert text == (
        "WITH s0 AS (SELECT execsys_fence($1, $2)), given AS (SELECT $3 AS x), "
        "s1 AS (INSERT INTO t1 (x) SELECT x FROM given WHERE x::text LIKE '1%'), "
        "s2 AS (UPDATE t2 SET y = $4) SELECT (SELECT count(*) FROM s0)"
    )
    assert params == ("d", 1, [1], 5)
    dumped = Transformer()
    dumped.dump_sequence(params, [PyFormat.AUTO] * len(params))  # as a raw cursor sends them
    assert dumped.formats[2] == pq.Format.BINARY, "a %b array goes in binary, as asked"
    with pytest.raises(NotCombinable):
        batch.execute("DELETE FROM t4 WHERE x = %s", (1, 2))  # numbering needs the exact count
    with pytest.raises(NotCombinable):
        batch.execute("DELETE FROM t5 WHERE x = %(name)s", {"name": 1})  # type: ignore[arg-type]
    with pytest.raises(NotCombinable):
        batch.execute("UPDATE t2 SET y = %s", (6,))  # one row could be written twice
    with pytest.raises(NotCombinable):
        batch.execute("WITH given AS (SELECT 2) INSERT INTO t3 SELECT 1", ())
    with pytest.raises(NotCombinable):
        batch.execute("LOCK TABLE t1", ())


def _stops(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return [(r[0], r[1]) for r in conn.execute("SELECT delivery, actor FROM execsys_stops")]


def test_a_failing_part_applies_no_part(pg_url: str) -> None:
    migrate(pg_url)
    store = PostgresStorage.open(pg_url)
    try:
        with store.lease_transaction() as tx:
            tx.put_lease("d", "me", 3, 2e9)
        with store.step_transaction() as tx:
            tx.fence("d", 3)
            tx.request_stop("d", 1.0, "kept")
            tx.append_journal("d", [(0, "sha256:a", b"{}")])
        assert _stops(pg_url) == [("d", "kept")]
        with pytest.raises(psycopg.Error) as stale, store.step_transaction() as tx:  # noqa: PT012
            tx.fence("d", 2)
            tx.clear_stop("d")
        assert fenced_token(stale.value) == "3"
        with pytest.raises(psycopg.errors.UniqueViolation), store.step_transaction() as tx:  # noqa: PT012
            tx.fence("d", 3)
            tx.clear_stop("d")
            tx.append_journal("d", [(0, "sha256:b", b"{}")])  # ordinal 0 is taken
        assert _stops(pg_url) == [("d", "kept")], "the failing part undid the others"
        with pytest.raises(RuntimeError), store.step_transaction() as tx:  # noqa: PT012
            tx.fence("d", 3)
            tx.clear_stop("d")
            raise RuntimeError("the body failed: nothing is sent")
        assert _stops(pg_url) == [("d", "kept")]
    finally:
        store.close()


def test_a_read_in_the_body_turns_it_into_a_transaction_that_sees_its_own_writes(
    pg_url: str,
) -> None:
    migrate(pg_url)
    store = PostgresStorage.open(pg_url)
    try:
        with store.step_transaction() as tx:
            tx.put_records("d", [("sha256:r", b'{"v":1}')])
            assert tx.has_record("sha256:r"), "the read sees the write kept before it"
            tx.request_stop("d", 1.0, "after the read")
        with pytest.raises(RuntimeError), store.step_transaction() as tx:  # noqa: PT012
            tx.clear_stop("d")
            assert tx.has_record("sha256:r")
            raise RuntimeError("rolled back")
        assert _stops(pg_url) == [("d", "after the read")]
    finally:
        store.close()


def test_lease_writes_go_as_one_statement_that_does_not_wait_for_the_flush(pg_url: str) -> None:
    migrate(pg_url)
    store = PostgresStorage.open(pg_url)
    try:
        with store.lease_transaction() as tx:
            tx.put_lease("d-lease", "me", 1, 2e9)
            sent = tx.cur
        assert isinstance(sent, StepCursor) and sent.cur is None, "no BEGIN, no COMMIT"
        with store.lease_transaction() as tx:
            tx.release_lease("d-lease", "me", 1)
            setting = tx.cur.execute("SELECT current_setting('synchronous_commit') AS s")
            assert setting.fetchone() == {"s": "off"}, "a lease commit skips the flush wait"
        assert store.lease("d-lease") == ("me", 1, 0.0)
        with store.step_transaction() as tx:
            setting = tx.cur.execute("SELECT current_setting('synchronous_commit') AS s")
            assert setting.fetchone() == {"s": "on"}, "a step's commit waits for the flush"
    finally:
        store.close()


@pytest.mark.parametrize("rows", [1, 3, VALUES_MAX_ROWS, VALUES_MAX_ROWS + 1, 150])
def test_multi_row_writes_store_every_row_as_values_or_as_arrays(pg_url: str, rows: int) -> None:
    migrate(pg_url, setup_checkpoint_tables)
    store = PostgresStorage.open(pg_url)
    records = [(f"sha256:{i}", f'{{"v":{i}}}'.encode()) for i in range(rows)]
    records.append(records[0])  # the same record twice in one step is stored once
    lines = [(i, f"sha256:line{i}", f'{{"n":{i}}}'.encode()) for i in range(rows)]
    body = bytes(range(256)) * rows
    try:
        with store.step_transaction() as tx:
            tx.put_checkpoint("d", "", "cp", None, {"v": 1}, {}, ("bytes", body))
            tx.put_records("d", records)
            tx.append_journal("d", lines)
        assert store.journal_lines("d") == [line for _, _, line in lines]
        with psycopg.connect(pg_url) as conn:
            refs = conn.execute(
                "SELECT count(*) FROM execsys_record_refs WHERE delivery = 'd'"
            ).fetchone()
        assert refs is not None and refs[0] == rows
        assert store.get_record(f"sha256:{rows - 1}") == {"v": rows - 1}
        assert store.checkpoint_chain("d", "", "cp", "delta/", 5) == {"cp": ("bytes", body)}
    finally:
        store.close()


def test_the_hosts_own_commits_never_fall_back_to_a_transaction(
    pg_url: str, tmp_path: Path
) -> None:
    """Admission and every step of a run go out as one statement each: no read, no refusal."""
    doc, behaviour = looping_graph(3)

    config = LangGraphHostConfig(engine="langgraph", store=pg_url, data_dir=str(tmp_path))
    runner = RunnerFactory(config).create(
        custody=MemoryCustody(), invoker=ScriptInvoker({"step": behaviour})
    )
    try:
        before = Counter(FALLBACKS)
        report = asyncio.run(runner.host.run(make_delivery(doc)))
        assert report.status == "completed"
        assert before == FALLBACKS, FALLBACKS - before
    finally:
        runner.close()
