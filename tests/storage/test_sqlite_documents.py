"""SQLite keeps each delivery's document apart from the status row every step rewrites."""

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
