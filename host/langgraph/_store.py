"""The Host's own tables, beside LangGraph's, in the one SQLite store file.

This module uses only ``sqlite3``: reading commands (``status``, ``inspect``,
``journal verify``) go through it without importing LangGraph.

Tables (all prefixed ``execsys_``):

* ``deliveries`` — one row per admitted delivery: its canonical document, and
  the status derived from its last checkpoint (written in that checkpoint's
  transaction, so the two never disagree).
* ``records`` — content-addressed values (node outputs, selections, results),
  stored once per digest; checkpoints reference them by digest.
* ``journal`` — the hash-chained transition journal: ordinal 0 is the header.
* ``leases`` — per-delivery owner and fencing token.
* ``retirements`` — the durable fact left when a delivery is retired.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from contracts import ErrorCode, error

SCHEMA = """
CREATE TABLE IF NOT EXISTS execsys_deliveries (
    delivery TEXT PRIMARY KEY,
    graph TEXT NOT NULL,
    graph_digest TEXT NOT NULL,
    digest TEXT NOT NULL,
    document BLOB NOT NULL,
    status TEXT NOT NULL,
    outcome TEXT,
    detail TEXT NOT NULL DEFAULT '{}',
    checkpoint TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS execsys_deliveries_by_change ON execsys_deliveries (updated, delivery);
CREATE TABLE IF NOT EXISTS execsys_records (
    digest TEXT PRIMARY KEY,
    body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS execsys_journal (
    delivery TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    digest TEXT NOT NULL,
    line BLOB NOT NULL,
    PRIMARY KEY (delivery, ordinal)
);
CREATE TABLE IF NOT EXISTS execsys_leases (
    delivery TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    token INTEGER NOT NULL,
    expires REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS execsys_record_refs (
    delivery TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (delivery, digest)
);
CREATE TABLE IF NOT EXISTS execsys_checkpoints (
    delivery TEXT NOT NULL,
    checkpoint TEXT NOT NULL,
    savepoint TEXT,
    events INTEGER NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (delivery, checkpoint)
);
CREATE TABLE IF NOT EXISTS execsys_stops (
    delivery TEXT PRIMARY KEY,
    requested REAL NOT NULL,
    actor TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS execsys_retirements (
    delivery TEXT PRIMARY KEY,
    authorization TEXT NOT NULL,
    fact BLOB NOT NULL
);
"""


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """Open the store file with the settings every connection needs."""
    if readonly:
        if not path.exists():
            raise error(
                ErrorCode.STORE_NOT_FOUND,
                "no store here",
                path=str(path),
                expected="a store created by 'execsys run' (check --store and EXECSYS_STORE)",
            )
        conn = _connect_read_only(path)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False, timeout=10.0)
        conn.execute("PRAGMA journal_mode=WAL")
    # Several processes share the file: wait for a writer instead of failing at once.
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """Open ``path`` for reading only, even where this process may not write at all.

    A WAL store needs its ``-shm`` index, which SQLite creates on first read; in
    a folder we may not write, that fails. With no WAL content to miss, the file
    alone is the whole store and is opened immutable; otherwise it is refused.
    """
    # Quoted: a '?' or '#' in the path must stay part of the file name.
    base = f"file:{quote(str(path.absolute()))}?mode=ro"
    conn = sqlite3.connect(base, uri=True, check_same_thread=False, timeout=10.0)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except sqlite3.OperationalError:
        conn.close()
        wal = path.with_name(path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise error(
                ErrorCode.STORE_READ_ONLY,
                "the store has unmerged WAL content this user cannot index (no -shm file)",
                path=str(path),
                expected="read access to the store's -wal and -shm files, or a writable folder",
            ) from None
        conn = sqlite3.connect(
            base + "&immutable=1", uri=True, check_same_thread=False, timeout=10.0
        )
    return conn


class Store:
    """The Host's tables on one connection (shared with the checkpointer)."""

    def __init__(self, conn: sqlite3.Connection, lock: threading.Lock | None = None) -> None:
        self.conn = conn
        self.lock = lock or threading.Lock()

    def setup(self) -> None:
        """Create the Host's tables if missing."""
        with self.lock:
            self.conn.executescript(SCHEMA)
            self.conn.commit()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Cursor]:
        """One write transaction; rolled back if the body raises."""
        with self.lock:
            cur = self.conn.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                yield cur
            except BaseException:
                self.conn.rollback()
                raise
            else:
                self.conn.commit()
            finally:
                cur.close()

    def read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run a read query."""
        with self.lock:
            return list(self.conn.execute(sql, params).fetchall())

    # --- deliveries -------------------------------------------------------------

    def insert_delivery(
        self,
        cur: sqlite3.Cursor,
        delivery: str,
        graph: str,
        graph_digest: str,
        digest: str,
        document: bytes,
    ) -> None:
        """Record a newly admitted delivery (status ``running``)."""
        now = time.time()
        cur.execute(
            "INSERT INTO execsys_deliveries (delivery, graph, graph_digest, digest, document, "
            "status, outcome, detail, created, updated) VALUES (?, ?, ?, ?, ?, 'running', NULL, "
            "'{}', ?, ?)",
            (delivery, graph, graph_digest, digest, document, now, now),
        )

    def delivery_row(self, delivery: str) -> dict[str, Any] | None:
        """The delivery's row as a dict, or None."""
        rows = self.read(
            "SELECT delivery, graph, graph_digest, digest, document, status, outcome, detail, "
            "checkpoint, created, updated FROM execsys_deliveries WHERE delivery = ?",
            (delivery,),
        )
        if not rows:
            return None
        keys = (
            "delivery",
            "graph",
            "graph_digest",
            "digest",
            "document",
            "status",
            "outcome",
            "detail",
            "checkpoint",
            "created",
            "updated",
        )
        row = dict(zip(keys, rows[0], strict=True))
        row["detail"] = json.loads(row["detail"] or "{}")
        return row

    def list_deliveries(self) -> list[dict[str, Any]]:
        """Every delivery, newest first."""
        rows = self.read(
            "SELECT delivery, graph, status, outcome, updated FROM execsys_deliveries "
            "ORDER BY updated DESC"
        )
        return [
            {"delivery": d, "graph": g, "status": s, "outcome": o, "updated": u}
            for d, g, s, o, u in rows
        ]

    def page_deliveries(
        self,
        *,
        limit: int,
        offset: int = 0,
        status: str | None = None,
        graph: str | None = None,
        changed_since: float | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """One page of deliveries, latest change first, and how many match in all."""
        where, params = [], []
        for clause, value in (
            ("status = ?", status),
            ("graph = ?", graph),
            ("updated >= ?", changed_since),
        ):
            if value is not None:
                where.append(clause)
                params.append(value)
        condition = f" WHERE {' AND '.join(where)}" if where else ""
        total = self.read(f"SELECT COUNT(*) FROM execsys_deliveries{condition}", tuple(params))
        rows = self.read(
            "SELECT delivery, graph, status, outcome, updated FROM execsys_deliveries"
            f"{condition} ORDER BY updated DESC, delivery DESC LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        return [
            {"delivery": d, "graph": g, "status": s, "outcome": o, "updated": u}
            for d, g, s, o, u in rows
        ], int(total[0][0])

    @staticmethod
    def set_status(
        cur: sqlite3.Cursor,
        delivery: str,
        status: str,
        outcome: str | None,
        detail: dict[str, Any],
        checkpoint: str | None,
    ) -> None:
        """Update the derived status (inside the checkpoint's transaction)."""
        cur.execute(
            "UPDATE execsys_deliveries SET status = ?, outcome = ?, detail = ?, "
            "checkpoint = COALESCE(?, checkpoint), updated = ? WHERE delivery = ?",
            (
                status,
                outcome,
                json.dumps(detail, sort_keys=True),
                checkpoint,
                time.time(),
                delivery,
            ),
        )

    # --- records ------------------------------------------------------------------

    @staticmethod
    def put_record(cur: sqlite3.Cursor, digest: str, body: bytes) -> None:
        """Store a content-addressed value (idempotent)."""
        cur.execute(
            "INSERT OR IGNORE INTO execsys_records (digest, body) VALUES (?, ?)", (digest, body)
        )

    @staticmethod
    def put_record_ref(cur: sqlite3.Cursor, delivery: str, digest: str) -> None:
        """Remember that ``delivery`` references a record (retirement keeps shared ones)."""
        cur.execute(
            "INSERT OR IGNORE INTO execsys_record_refs (delivery, digest) VALUES (?, ?)",
            (delivery, digest),
        )

    @staticmethod
    def index_checkpoint(
        cur: sqlite3.Cursor, delivery: str, checkpoint: str, savepoint: str | None, events: int
    ) -> None:
        """Record which savepoint and journal length a checkpoint embodies."""
        cur.execute(
            "INSERT OR REPLACE INTO execsys_checkpoints (delivery, checkpoint, savepoint, events, "
            "created) VALUES (?, ?, ?, ?, ?)",
            (delivery, checkpoint, savepoint, events, time.time()),
        )

    def savepoint_checkpoints(self, delivery: str) -> list[dict[str, Any]]:
        """Each savepoint the delivery's checkpoints embodied: its latest checkpoint."""
        rows = self.read(
            "SELECT savepoint, checkpoint, events, created FROM execsys_checkpoints "
            "WHERE delivery = ? AND savepoint IS NOT NULL ORDER BY checkpoint",
            (delivery,),
        )
        latest: dict[str, dict[str, Any]] = {}
        for savepoint, checkpoint, events, created in rows:
            latest.setdefault(
                savepoint, {"savepoint": savepoint, "first": checkpoint, "created": created}
            )
            latest[savepoint].update({"checkpoint": checkpoint, "events": events})
        return list(latest.values())

    def get_record(self, digest: str) -> Any:
        """Load a content-addressed value."""
        rows = self.read("SELECT body FROM execsys_records WHERE digest = ?", (digest,))
        if not rows:
            raise error(ErrorCode.STORE_ERROR, f"record {digest} is missing", path=digest)
        return json.loads(rows[0][0])

    # --- journal ------------------------------------------------------------------

    @staticmethod
    def put_journal_line(
        cur: sqlite3.Cursor, delivery: str, ordinal: int, digest: str, line: bytes
    ) -> None:
        """Append one journal line (ordinal 0 is the header)."""
        cur.execute(
            "INSERT INTO execsys_journal (delivery, ordinal, digest, line) VALUES (?, ?, ?, ?)",
            (delivery, ordinal, digest, line),
        )

    def journal_lines(self, delivery: str) -> list[bytes]:
        """The delivery's journal, header first, in ordinal order."""
        rows = self.read(
            "SELECT line FROM execsys_journal WHERE delivery = ? ORDER BY ordinal", (delivery,)
        )
        return [bytes(r[0]) for r in rows]

    def journal_head(self, delivery: str) -> tuple[str | None, int]:
        """(head digest, event count) of the stored journal."""
        rows = self.read(
            "SELECT digest, ordinal FROM execsys_journal WHERE delivery = ? "
            "ORDER BY ordinal DESC LIMIT 1",
            (delivery,),
        )
        if not rows:
            return None, 0
        return str(rows[0][0]), int(rows[0][1])

    # --- checkpoints (LangGraph's table, read-only here) ------------------------------

    def latest_checkpoint(self, delivery: str) -> str | None:
        """The id of the thread's latest checkpoint (LangGraph ids sort by time)."""
        try:
            rows = self.read(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
                "ORDER BY checkpoint_id DESC LIMIT 1",
                (delivery,),
            )
        except sqlite3.OperationalError:
            return None
        return str(rows[0][0]) if rows else None
