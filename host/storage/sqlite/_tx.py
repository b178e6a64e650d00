"""A write transaction of the SQLite backend: every statement the Host writes with."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from typing import Any

from host.storage._port import DeliveryRow, LeaseRow, ListedDelivery
from host.storage.sqlite._goals import SqliteGoalWrites


class SqliteTx(SqliteGoalWrites):
    """One SQLite write transaction (a cursor inside ``BEGIN IMMEDIATE``)."""

    def __init__(self, cur: sqlite3.Cursor) -> None:
        self.cur = cur

    # --- fencing and leases -----------------------------------------------------

    def fencing_token(self, delivery: str) -> int | None:
        """The lease token (the transaction already holds SQLite's write lock)."""
        row = self.cur.execute(
            "SELECT token FROM execsys_leases WHERE delivery = ?", (delivery,)
        ).fetchone()
        return None if row is None else int(row[0])

    def lease(self, delivery: str) -> LeaseRow | None:
        """The delivery's lease row."""
        row = self.cur.execute(
            "SELECT holder, token, expires FROM execsys_leases WHERE delivery = ?", (delivery,)
        ).fetchone()
        return None if row is None else LeaseRow(str(row[0]), int(row[1]), float(row[2]))

    def put_lease(self, delivery: str, holder: str, token: int, expires: float) -> None:
        """Create or overwrite the lease row."""
        self.cur.execute(
            "INSERT INTO execsys_leases (delivery, holder, token, expires) "
            "VALUES (?, ?, ?, ?) ON CONFLICT(delivery) DO UPDATE SET "
            "holder = excluded.holder, token = excluded.token, expires = excluded.expires",
            (delivery, holder, token, expires),
        )

    def holder_has_leases(self, holder: str) -> bool:
        """Whether any lease row names ``holder``."""
        row = self.cur.execute(
            "SELECT 1 FROM execsys_leases WHERE holder = ? LIMIT 1", (holder,)
        ).fetchone()
        return row is not None

    def renew_lease(self, delivery: str, holder: str, token: int, expires: float) -> bool:
        """Move the expiry if the lease is still ``holder``'s under ``token``."""
        changed = self.cur.execute(
            "UPDATE execsys_leases SET expires = ? WHERE delivery = ? AND token = ? AND holder = ?",
            (expires, delivery, token, holder),
        ).rowcount
        return bool(changed == 1)

    def release_lease(self, delivery: str, holder: str, token: int) -> None:
        """Mark the lease released if it is still ``holder``'s under ``token``."""
        self.cur.execute(
            "UPDATE execsys_leases SET expires = 0 WHERE delivery = ? AND token = ? AND holder = ?",
            (delivery, token, holder),
        )

    # --- deliveries -------------------------------------------------------------

    def insert_delivery(
        self, delivery: str, graph: str, graph_digest: str, digest: str, document: bytes
    ) -> None:
        """Record a newly admitted delivery (status ``running``).

        The document goes to its own table: the delivery row is rewritten at
        every step, and a large value in it would be rewritten with it.
        """
        now = time.time()
        self.cur.execute(
            "INSERT INTO execsys_deliveries (delivery, graph, graph_digest, digest, document, "
            "status, outcome, detail, created, updated) VALUES (?, ?, ?, ?, X'', 'running', "
            "NULL, '{}', ?, ?)",
            (delivery, graph, graph_digest, digest, now, now),
        )
        self.cur.execute(
            "INSERT INTO execsys_documents (delivery, document) VALUES (?, ?)",
            (delivery, document),
        )

    def delivery(self, delivery: str) -> DeliveryRow | None:
        """The delivery's row as this transaction sees it."""
        return delivery_row(self.cur, delivery)

    def set_status(
        self,
        delivery: str,
        status: str,
        outcome: str | None,
        detail: dict[str, Any],
        checkpoint: str | None,
    ) -> None:
        """Update the derived status (inside the checkpoint's transaction)."""
        self.cur.execute(
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

    def claim_queued(self, delivery: str, message: str) -> bool:
        """Move a ``queued`` delivery to ``running``; False if it is not queued."""
        self.cur.execute(
            "UPDATE execsys_deliveries SET status = 'running', "
            "detail = json_set(detail, '$.message', ?), updated = ? "
            "WHERE delivery = ? AND status = 'queued'",
            (message, time.time(), delivery),
        )
        return self.cur.rowcount == 1

    # --- records ------------------------------------------------------------------

    def put_record(self, digest: str, body: bytes) -> None:
        """Store a content-addressed value (idempotent)."""
        self.cur.execute(
            "INSERT OR IGNORE INTO execsys_records (digest, body) VALUES (?, ?)", (digest, body)
        )

    def put_record_ref(self, delivery: str, digest: str) -> None:
        """Remember that ``delivery`` references a record (retirement keeps shared ones)."""
        self.cur.execute(
            "INSERT OR IGNORE INTO execsys_record_refs (delivery, digest) VALUES (?, ?)",
            (delivery, digest),
        )

    def put_records(self, delivery: str, records: list[tuple[str, bytes]]) -> None:
        """Every record and its reference (two ``executemany``)."""
        self.cur.executemany(
            "INSERT OR IGNORE INTO execsys_records (digest, body) VALUES (?, ?)", records
        )
        self.cur.executemany(
            "INSERT OR IGNORE INTO execsys_record_refs (delivery, digest) VALUES (?, ?)",
            [(delivery, digest) for digest, _ in records],
        )

    def has_record(self, digest: str) -> bool:
        """Whether the record is stored (this transaction included)."""
        row = self.cur.execute(
            "SELECT 1 FROM execsys_records WHERE digest = ?", (digest,)
        ).fetchone()
        return row is not None

    # --- journal and checkpoint index ---------------------------------------------

    def journal_lines(self, delivery: str) -> list[bytes]:
        """The delivery's journal lines, header first."""
        rows = self.cur.execute(JOURNAL_SQL, (delivery,)).fetchall()
        return [bytes(r[0]) for r in rows]

    def journal_head(self, delivery: str) -> tuple[str | None, int]:
        """(digest, ordinal) of the last journal line."""
        row = self.cur.execute(HEAD_SQL, (delivery,)).fetchone()
        return (None, 0) if row is None else (str(row[0]), int(row[1]))

    def append_journal(self, delivery: str, rows: Iterable[tuple[int, str, bytes]]) -> None:
        """Append journal lines (the primary key refuses a taken ordinal)."""
        self.cur.executemany(
            "INSERT INTO execsys_journal (delivery, ordinal, digest, line) VALUES (?, ?, ?, ?)",
            [(delivery, *row) for row in rows],
        )

    def index_checkpoint(
        self, delivery: str, checkpoint: str, savepoint: str | None, events: int
    ) -> None:
        """Record which savepoint and journal length a checkpoint embodies."""
        self.cur.execute(
            "INSERT OR REPLACE INTO execsys_checkpoints (delivery, checkpoint, savepoint, events, "
            "created) VALUES (?, ?, ?, ?, ?)",
            (delivery, checkpoint, savepoint, events, time.time()),
        )

    # --- LangGraph's tables (used by the checkpointer in its own transaction) --------

    def put_checkpoint(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        parent_id: str | None,
        type_: str | None,
        blob: bytes,
        metadata: bytes,
    ) -> None:
        """Write one row of SqliteSaver's ``checkpoints`` table."""
        self.cur.execute(
            "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
            "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (thread_id, checkpoint_ns, checkpoint_id, parent_id, type_, blob, metadata),
        )

    def put_writes(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Write rows of SqliteSaver's ``writes`` table.

        Each row: (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx,
        channel, type, value).
        """
        self.cur.executemany(
            "INSERT OR REPLACE INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
            "task_path, idx, channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    # --- stop requests and retirement -----------------------------------------------

    def request_stop(self, delivery: str, requested: float, actor: str) -> None:
        """Record (or replace) a stop request."""
        self.cur.execute(
            "INSERT OR REPLACE INTO execsys_stops (delivery, requested, actor) VALUES (?, ?, ?)",
            (delivery, requested, actor),
        )

    def clear_stop(self, delivery: str) -> None:
        """Forget a stop request."""
        self.cur.execute("DELETE FROM execsys_stops WHERE delivery = ?", (delivery,))

    def retirement(self, delivery: str) -> tuple[str, dict[str, Any]] | None:
        """(authorization, fact) of the delivery's retirement, if any."""
        row = self.cur.execute(
            "SELECT authorization, fact FROM execsys_retirements WHERE delivery = ?",
            (delivery,),
        ).fetchone()
        return None if row is None else (str(row[0]), json.loads(row[1]))

    def retire(self, delivery: str, authorization: str, fact: dict[str, Any], outcome: str) -> None:
        """Delete the delivery's checkpoints and unshared records; keep the fact."""
        cur = self.cur
        cur.execute("DELETE FROM checkpoints WHERE thread_id = ?", (delivery,))
        cur.execute("DELETE FROM writes WHERE thread_id = ?", (delivery,))
        cur.execute("DELETE FROM execsys_checkpoints WHERE delivery = ?", (delivery,))
        cur.execute(
            "DELETE FROM execsys_records WHERE digest IN (SELECT digest FROM execsys_record_refs "
            "WHERE delivery = ?) AND digest NOT IN (SELECT digest FROM execsys_record_refs "
            "WHERE delivery != ?)",
            (delivery, delivery),
        )
        cur.execute("DELETE FROM execsys_record_refs WHERE delivery = ?", (delivery,))
        cur.execute(
            "INSERT INTO execsys_retirements (delivery, authorization, fact) VALUES (?, ?, ?)",
            (delivery, authorization, json.dumps(fact, sort_keys=True)),
        )
        cur.execute(
            "UPDATE execsys_deliveries SET status = 'retired', outcome = ?, updated = ? "
            "WHERE delivery = ?",
            (outcome, time.time(), delivery),
        )


DELIVERY_SQL = (
    "SELECT delivery, graph, graph_digest, digest, document, status, outcome, detail, "
    "checkpoint, created, updated FROM execsys_deliveries WHERE delivery = ?"
)
DOCUMENT_SQL = "SELECT document FROM execsys_documents WHERE delivery = ?"
JOURNAL_SQL = "SELECT line FROM execsys_journal WHERE delivery = ? ORDER BY ordinal"
HEAD_SQL = (
    "SELECT digest, ordinal FROM execsys_journal WHERE delivery = ? ORDER BY ordinal DESC LIMIT 1"
)


def delivery_row(cur: sqlite3.Cursor, delivery: str) -> DeliveryRow | None:
    """The delivery's row read with ``cur``, its document from wherever it is kept."""
    rows = cur.execute(DELIVERY_SQL, (delivery,)).fetchall()
    if not rows:
        return None
    d, g, gd, dg, doc, status, outcome, detail, checkpoint, created, updated = rows[0]
    if not doc:  # admitted since documents have their own table; older rows keep theirs
        found = cur.execute(DOCUMENT_SQL, (delivery,)).fetchone()
        doc = found[0] if found else b""
    return DeliveryRow(
        delivery=d,
        graph=g,
        graph_digest=gd,
        digest=dg,
        document=bytes(doc),
        status=status,
        outcome=outcome,
        detail=json.loads(detail or "{}"),
        checkpoint=checkpoint,
        created=float(created),
        updated=float(updated),
    )


def listed(rows: list[Any]) -> list[ListedDelivery]:
    return [
        ListedDelivery(delivery=d, graph=g, status=s, outcome=o, updated=float(u))
        for d, g, s, o, u in rows
    ]
