"""The SQLite backend of the storage port: the Host's tables beside LangGraph's, one file.

Every SQL string of the SQLite backend lives in this package, the statements
the LangGraph checkpointer adds to its own transaction included. This module
uses only ``sqlite3``: reading commands (``status``, ``inspect``, ``journal
verify``) go through it without importing LangGraph.

Tables (all prefixed ``execsys_``):

* ``deliveries`` — one row per admitted delivery: the status derived from its
  last checkpoint (written in that checkpoint's transaction, so the two never
  disagree). Its ``document`` column is empty for deliveries admitted since the
  documents moved to their own table; older rows keep theirs there.
* ``documents`` — the canonical admitted document of each delivery, apart from
  the row every step rewrites: SQLite rewrites all of a row's overflow pages
  when an update changes its size, so a document in the status row cost every
  step one WAL page per 4 KiB of graph.
* ``records`` — content-addressed values (node outputs, selections, results),
  stored once per digest; checkpoints reference them by digest.
* ``journal`` — the hash-chained transition journal: ordinal 0 is the header.
* ``leases`` — per-delivery owner and fencing token.
* ``retirements`` — the durable fact left when a delivery is retired.
* ``goals`` and ``goal_notes`` — CodeClosure's goals and their notes (``_goals.py``).

``checkpoints`` (the index of the Host's checkpoints) and ``record_refs`` are
``WITHOUT ROWID``: their rows are small and always found by the primary key,
so each insert writes one b-tree page instead of a table page and an index
page (a step's commit went from about 14.4 to 12.6 WAL pages). Stores created
before keep their rowid tables, which the same statements read and write.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from contracts import ErrorCode, error
from host.storage._fencing import fenced
from host.storage._port import DeliveryRow, LeaseRow, ListedDelivery, RunnerRow
from host.storage.sqlite._errors import store_not_found
from host.storage.sqlite._goals import GOAL_SCHEMA, SqliteGoalReads
from host.storage.sqlite._tx import (
    HEAD_SQL,
    JOURNAL_SQL,
    SqliteTx,
    delivery_row,
    listed,
)

SCHEMA = (
    """
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
CREATE TABLE IF NOT EXISTS execsys_documents (
    delivery TEXT PRIMARY KEY,
    document BLOB NOT NULL
);
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
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS execsys_checkpoints (
    delivery TEXT NOT NULL,
    checkpoint TEXT NOT NULL,
    savepoint TEXT,
    events INTEGER NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (delivery, checkpoint)
) WITHOUT ROWID;
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
CREATE TABLE IF NOT EXISTS execsys_runners (
    name TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started REAL NOT NULL,
    heartbeat REAL NOT NULL
);
"""
    + GOAL_SCHEMA
)


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """Open the store file with the settings every connection needs."""
    if readonly:
        if not path.exists():
            raise store_not_found(path)
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


class SqliteStorage(SqliteGoalReads):
    """The Host's tables on one connection (shared with the checkpointer)."""

    errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
    archive = None
    """One machine: custody's own files are the only copy."""

    def __init__(self, conn: sqlite3.Connection, lock: threading.Lock | None = None) -> None:
        self.conn = conn
        self.lock = lock or threading.Lock()

    @classmethod
    def open(cls, path: Path, *, readonly: bool = False) -> SqliteStorage:
        """Open the store file (see :func:`connect`)."""
        return cls(connect(path, readonly=readonly))

    def setup(self) -> None:
        """Create the Host's tables if missing."""
        with self.lock:
            self.conn.executescript(SCHEMA)
            self.conn.commit()

    @contextmanager
    def transaction(self, *, flush: bool = True) -> Iterator[SqliteTx]:
        """One write transaction; rolled back if the body raises.

        ``flush=False`` commits it with ``synchronous=NORMAL``: no fsync. It is
        visible to other processes at once (WAL) and survives the death of any
        process; only a power cut or an operating-system crash can undo it, and
        the next fsynced commit makes it durable with everything before it.
        """
        with self.lock:
            conn = self.conn
            previous = None
            if not flush:
                previous = conn.execute("PRAGMA synchronous").fetchone()[0]
                conn.execute("PRAGMA synchronous=NORMAL")
            cur = conn.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                yield SqliteTx(cur)
            except BaseException:
                conn.rollback()
                raise
            else:
                conn.commit()
            finally:
                cur.close()
                if previous is not None:
                    conn.execute(f"PRAGMA synchronous={int(previous)}")

    @contextmanager
    def fenced_transaction(
        self, delivery: str, token: int, *, flush: bool = True
    ) -> Iterator[SqliteTx]:
        """A write transaction that first reads the lease token and refuses a stale one."""
        with self.transaction(flush=flush) as tx:
            found = tx.fencing_token(delivery)
            if found != token:
                raise fenced(delivery, found)
            yield tx

    @contextmanager
    def lease_transaction(self) -> Iterator[SqliteTx]:
        """A write transaction of lease rows alone, committed without an fsync.

        A grant that a power loss undid was never used: the first fenced write
        under its token (an fsynced commit) makes every earlier commit durable too.
        """
        with self.transaction(flush=False) as tx:
            yield tx

    @contextmanager
    def saver_cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """The cursor LangGraph's SqliteSaver asks for, under the one connection lock.

        Unlike the stock saver's, a failing body rolls back instead of committing.
        """
        with self.lock:
            cur = self.conn.cursor()
            try:
                if transaction:
                    # Take the write lock up front: a deferred transaction that
                    # upgrades later can fail at once under another writer.
                    cur.execute("BEGIN IMMEDIATE")
                yield cur
            except BaseException:
                if transaction:
                    self.conn.rollback()
                raise
            else:
                if transaction:
                    self.conn.commit()
            finally:
                cur.close()

    def read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run a read query (this backend's own; not part of the port)."""
        with self.lock:
            return list(self.conn.execute(sql, params).fetchall())

    # --- deliveries -------------------------------------------------------------

    def delivery(self, delivery: str) -> DeliveryRow | None:
        """The delivery's row, or None."""
        with self.lock, closing(self.conn.cursor()) as cur:
            return delivery_row(cur, delivery)

    def deliveries(self) -> list[ListedDelivery]:
        """Every delivery, newest first."""
        return listed(
            self.read(
                "SELECT delivery, graph, status, outcome, updated FROM execsys_deliveries "
                "ORDER BY updated DESC"
            )
        )

    def queued(self, limit: int) -> list[str]:
        """Up to ``limit`` ``queued`` deliveries, longest waiting first."""
        rows = self.read(
            "SELECT delivery FROM execsys_deliveries WHERE status = 'queued' "
            "ORDER BY updated, delivery LIMIT ?",
            (limit,),
        )
        return [str(row[0]) for row in rows]

    def page_deliveries(
        self,
        *,
        limit: int,
        offset: int = 0,
        status: str | None = None,
        graph: str | None = None,
        changed_since: float | None = None,
    ) -> tuple[list[ListedDelivery], int]:
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
        return listed(rows), int(total[0][0])

    # --- records, checkpoints, journal ---------------------------------------------

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

    def checkpoint_events(self, delivery: str, checkpoint: str) -> int:
        """The journal length a checkpoint was committed with (0 if unknown)."""
        rows = self.read(
            "SELECT events FROM execsys_checkpoints WHERE delivery = ? AND checkpoint = ?",
            (delivery, checkpoint),
        )
        return int(rows[0][0]) if rows else 0

    def get_record(self, digest: str) -> Any:
        """Load a content-addressed value."""
        rows = self.read("SELECT body FROM execsys_records WHERE digest = ?", (digest,))
        if not rows:
            raise error(ErrorCode.STORE_ERROR, f"record {digest} is missing", path=digest)
        return json.loads(rows[0][0])

    def journal_lines(self, delivery: str) -> list[bytes]:
        """The delivery's journal, header first, in ordinal order."""
        return [bytes(r[0]) for r in self.read(JOURNAL_SQL, (delivery,))]

    def journal_head(self, delivery: str) -> tuple[str | None, int]:
        """(head digest, event count) of the stored journal."""
        rows = self.read(HEAD_SQL, (delivery,))
        if not rows:
            return None, 0
        return str(rows[0][0]), int(rows[0][1])

    def stored_checkpoint(self, thread: str, ns: str, checkpoint: str) -> tuple[str, bytes] | None:
        """One checkpoint row's (type, blob); for the saver, which already holds the lock."""
        row = self.conn.execute(
            "SELECT type, checkpoint FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            (thread, ns, checkpoint),
        ).fetchone()
        return None if row is None else (str(row[0]), bytes(row[1]))

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

    # --- stops, retirements, leases -------------------------------------------------

    def stop_request(self, delivery: str) -> str | None:
        """The actor text of a pending stop request."""
        rows = self.read("SELECT actor FROM execsys_stops WHERE delivery = ?", (delivery,))
        return None if not rows else str(rows[0][0])

    def retirement_fact(self, delivery: str) -> dict[str, Any] | None:
        """The retirement fact, if the delivery was retired."""
        rows = self.read("SELECT fact FROM execsys_retirements WHERE delivery = ?", (delivery,))
        if not rows:
            return None
        fact: dict[str, Any] = json.loads(rows[0][0])
        return fact

    def lease(self, delivery: str) -> LeaseRow | None:
        """The delivery's lease row."""
        rows = self.read(
            "SELECT holder, token, expires FROM execsys_leases WHERE delivery = ?", (delivery,)
        )
        if not rows:
            return None
        return LeaseRow(str(rows[0][0]), int(rows[0][1]), float(rows[0][2]))

    def grant_first_lease(self, delivery: str, holder: str, expires: float) -> bool:
        """Token 1 for ``holder`` unless the delivery is stored or was leased."""
        with self.lease_transaction() as tx:
            changed = tx.cur.execute(
                "INSERT INTO execsys_leases (delivery, holder, token, expires) SELECT ?, ?, 1, ? "
                "WHERE NOT EXISTS (SELECT 1 FROM execsys_deliveries WHERE delivery = ?) "
                "ON CONFLICT (delivery) DO NOTHING",
                (delivery, holder, expires, delivery),
            ).rowcount
        return bool(changed == 1)

    # --- runners ----------------------------------------------------------------

    def beat_runner(self, name: str, host: str, pid: int, started: float) -> None:
        """Record a runner's heartbeat now."""
        with self.transaction() as tx:
            tx.cur.execute(
                "INSERT INTO execsys_runners (name, host, pid, started, heartbeat) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET host = excluded.host, "
                "pid = excluded.pid, started = excluded.started, heartbeat = excluded.heartbeat",
                (name, host, pid, started, time.time()),
            )

    def drop_runner(self, name: str) -> None:
        """Remove a runner's row."""
        with self.transaction() as tx:
            tx.cur.execute("DELETE FROM execsys_runners WHERE name = ?", (name,))

    def runners(self) -> list[RunnerRow]:
        """Every runner row, by name, with the deliveries its process holds leases on."""
        try:
            rows = self.read(
                "SELECT name, host, pid, started, heartbeat FROM execsys_runners ORDER BY name"
            )
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []  # a store no runner has used since the table was added
            raise
        leases = self.read(
            "SELECT delivery, holder FROM execsys_leases WHERE expires > ? ORDER BY delivery",
            (time.time(),),
        )
        listed: list[RunnerRow] = []
        for name, host, pid, started, heartbeat in rows:
            prefix = f"{host}:{pid}:"
            held = [str(d) for d, holder in leases if str(holder).startswith(prefix)]
            listed.append(
                RunnerRow(
                    name=str(name),
                    host=str(host),
                    pid=int(pid),
                    started=float(started),
                    heartbeat=float(heartbeat),
                    deliveries=held,
                )
            )
        return listed

    def close(self) -> None:
        """Close the connection."""
        with self.lock:
            self.conn.close()
