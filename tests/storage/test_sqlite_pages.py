"""What a step makes SQLite write: the status row without the document, one page per index row."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from host.storage.sqlite import SqliteStorage

DOC = os.urandom(64 * 1024)  # a large graph's document: sixteen overflow pages


def _open(tmp_path: Path) -> SqliteStorage:
    storage = SqliteStorage.open(tmp_path / "state.db")
    storage.setup()
    return storage


def _wal_frames(storage: SqliteStorage) -> int:
    # Each status update runs in its own transaction; the WAL only grows until a
    # checkpoint, which is switched off here so every frame stays counted.
    wal = Path(storage.conn.execute("PRAGMA database_list").fetchone()[2] + "-wal")
    return wal.stat().st_size // (4096 + 24)


def test_the_document_round_trips_through_its_own_table(tmp_path: Path) -> None:
    storage = _open(tmp_path)
    with storage.transaction() as tx:
        tx.insert_delivery("d-1", "g", "sha256:g", "sha256:d", DOC)
    row = storage.delivery("d-1")
    assert row is not None and row["document"] == DOC
    with storage.transaction() as tx:
        seen = tx.delivery("d-1")
    assert seen is not None and seen["document"] == DOC
    inline = storage.read("SELECT length(document) FROM execsys_deliveries WHERE delivery = 'd-1'")
    assert inline == [(0,)]


def test_a_row_written_before_the_documents_table_keeps_its_document(tmp_path: Path) -> None:
    storage = _open(tmp_path)
    conn = sqlite3.connect(tmp_path / "state.db")
    conn.execute(
        "INSERT INTO execsys_deliveries (delivery, graph, graph_digest, digest, document, status, "
        "outcome, detail, created, updated) VALUES ('d-old', 'g', 'sha256:g', 'sha256:d', ?, "
        "'running', NULL, '{}', 0, 0)",
        (DOC,),
    )
    conn.commit()
    conn.close()
    row = storage.delivery("d-old")
    assert row is not None and row["document"] == DOC


def test_a_status_update_does_not_rewrite_the_document(tmp_path: Path) -> None:
    storage = _open(tmp_path)
    storage.conn.execute("PRAGMA wal_autocheckpoint=0")
    with storage.transaction() as tx:
        tx.insert_delivery("d-1", "g", "sha256:g", "sha256:d", DOC)
    before = _wal_frames(storage)
    for i in range(10):
        with storage.transaction() as tx:  # a detail whose size changes every time
            tx.set_status("d-1", "running", None, {"message": "x" * (i * 7)}, f"c{i}")
    # The status row, its index and the header page: a few pages per update,
    # where a document in the row made every size change rewrite all sixteen.
    assert (_wal_frames(storage) - before) / 10 <= 4


def test_the_index_rows_of_a_step_write_one_page_each(tmp_path: Path) -> None:
    # The checkpoint index and the record references are keyed by their primary
    # key alone, so each insert touches one b-tree, not a table and its index.
    storage = _open(tmp_path)
    storage.conn.execute("PRAGMA wal_autocheckpoint=0")
    with storage.transaction() as tx:
        tx.insert_delivery("d-1", "g", "sha256:g", "sha256:d", b"{}")
    before = _wal_frames(storage)
    for i in range(20):
        with storage.transaction() as tx:
            tx.index_checkpoint("d-1", f"1f0-{i:04}", None, i)
            tx.put_record_ref("d-1", f"sha256:{i * 7919 % 101:064x}")
    # One page per table plus the header page of each commit.
    assert (_wal_frames(storage) - before) / 20 <= 3


def test_a_store_whose_index_tables_have_rowids_still_works(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "state.db")
    conn.executescript(
        "CREATE TABLE execsys_record_refs (delivery TEXT NOT NULL, digest TEXT NOT NULL, "
        "PRIMARY KEY (delivery, digest));"
        "CREATE TABLE execsys_checkpoints (delivery TEXT NOT NULL, checkpoint TEXT NOT NULL, "
        "savepoint TEXT, events INTEGER NOT NULL, created REAL NOT NULL, "
        "PRIMARY KEY (delivery, checkpoint));"
    )
    conn.close()
    storage = _open(tmp_path)
    for _ in range(2):  # the second write of each row is ignored / replaced, as before
        with storage.transaction() as tx:
            tx.index_checkpoint("d-1", "c-1", "sp-1", 3)
            tx.put_record_ref("d-1", "sha256:ab")
    assert storage.read("SELECT savepoint, events FROM execsys_checkpoints") == [("sp-1", 3)]
    assert storage.read("SELECT digest FROM execsys_record_refs") == [("sha256:ab",)]
