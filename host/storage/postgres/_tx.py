"""A write transaction of the PostgreSQL backend: every statement the Host writes with.

The statements that write LangGraph's checkpoint tables (``put_checkpoint``,
``put_writes``) write the rows langgraph-checkpoint-postgres 3.2 writes, with
its conflict rules, kept here so the checkpointer adds no SQL of its own and
they run in the port's transaction. Multi-row writes (a checkpoint's blobs, a
step's journal lines) are one ``INSERT ... SELECT FROM unnest(arrays)`` each
rather than one statement per row: a step's commit sends fewer statements.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

from host.storage._port import DeliveryRow, LeaseRow, ListedDelivery
from host.storage.postgres._goals import PostgresGoalWrites
from host.storage.postgres._leases import FENCE_SQL, LEASE_FOR_SHARE
from host.storage.postgres._listen import NOTIFY_SQL

DELIVERY_SQL = (
    "SELECT delivery, graph, graph_digest, digest, document, status, outcome, detail, "
    "checkpoint, created, updated FROM execsys_deliveries WHERE delivery = %s"
)
CHAIN_SQL = (
    "WITH RECURSIVE chain AS ("
    "SELECT checkpoint_id, parent_id, type, body, 1 AS depth FROM execsys_checkpoint_bodies "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s "
    "UNION ALL SELECT b.checkpoint_id, b.parent_id, b.type, b.body, chain.depth + 1 "
    "FROM chain JOIN execsys_checkpoint_bodies b ON b.thread_id = %s AND b.checkpoint_ns = %s "
    "AND b.checkpoint_id = chain.parent_id "
    "WHERE starts_with(chain.type, %s) AND chain.depth < %s) "
    "SELECT checkpoint_id, type, body FROM chain"
)
"""A checkpoint's body and its parents' up to the first whole one (at most a limit)."""
BODY_COLUMN = (
    ", (SELECT array[b.type::bytea, b.body] FROM execsys_checkpoint_bodies b "
    "WHERE b.thread_id = checkpoints.thread_id AND b.checkpoint_ns = checkpoints.checkpoint_ns "
    "AND b.checkpoint_id = checkpoints.checkpoint_id) AS execsys_body "
)
"""A column for a query of ``checkpoints``: the row's body as [type, bytes], or NULL (a row
written in LangGraph's own layout, before decision 0155)."""
JOURNAL_SQL = "SELECT line FROM execsys_journal WHERE delivery = %s ORDER BY ordinal"
HEAD_SQL = (
    "SELECT digest, ordinal FROM execsys_journal WHERE delivery = %s ORDER BY ordinal DESC LIMIT 1"
)
_JOURNAL_SQL = (
    "INSERT INTO execsys_journal (delivery, ordinal, digest, line) "
    "SELECT %s, * FROM unnest(%b::bigint[], %b::text[], %b::bytea[])"
)
"""A step's journal lines in one statement (binary arrays of ordinals, digests and lines).

Arrays go in binary (``%b``): psycopg then packs each element as it is, where
the text form escapes every byte of a bytea into an array literal (about three
times the client's CPU for a step's rows).
"""
_BODY_SQL = (
    "INSERT INTO execsys_checkpoint_bodies (thread_id, checkpoint_ns, checkpoint_id, "
    "parent_id, type, body) VALUES (%s, %s, %s, %s, %s, %b) "
    "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET "
    "parent_id = EXCLUDED.parent_id, type = EXCLUDED.type, body = EXCLUDED.body"
)
"""A checkpoint's body: the whole checkpoint, or its delta from ``parent_id`` (decision 0155)."""
_CHECKPOINT_SQL = (
    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
    "checkpoint, metadata) VALUES (%s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET "
    "checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata"
)
_WRITES_SQL = (
    "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
    "task_path, idx, channel, type, blob) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET "
    "channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob"
)


class PostgresTx(PostgresGoalWrites):
    """One PostgreSQL write transaction (a cursor inside ``conn.transaction()``)."""

    def __init__(self, cur: psycopg.Cursor[DictRow]) -> None:
        self.cur = cur

    def _one(self, sql: Any, params: Sequence[Any]) -> DictRow | None:
        return self.cur.execute(sql, params).fetchone()

    # --- fencing and leases -----------------------------------------------------

    def fencing_token(self, delivery: str) -> int | None:
        """The lease token, read ``FOR SHARE``: a concurrent grant waits for this transaction."""
        row = self._one(LEASE_FOR_SHARE, (delivery,))
        return None if row is None else int(row["token"])

    def fence(self, delivery: str, token: int) -> None:
        """Refuse this transaction unless ``token`` is the delivery's current one.

        The same lock and check as :meth:`fencing_token` and the Host's
        comparison, in one statement whose result nobody reads: in a step's
        transaction it travels with the writes, and a refusal (SQLSTATE
        ``EXF01``, see :func:`fenced_token`) applies none of them.
        """
        self.cur.execute(FENCE_SQL, (delivery, token))

    def lease(self, delivery: str) -> LeaseRow | None:
        """The delivery's lease row, locked against concurrent grants until the commit.

        A delivery never granted gets a placeholder row (token 0, never a valid
        token) first, so two first grants contend for one row lock instead of
        both inserting.
        """
        self.cur.execute(
            "INSERT INTO execsys_leases (delivery, holder, token, expires) "
            "VALUES (%s, '', 0, 0) ON CONFLICT (delivery) DO NOTHING",
            (delivery,),
        )
        row = self._one(
            "SELECT holder, token, expires FROM execsys_leases WHERE delivery = %s FOR UPDATE",
            (delivery,),
        )
        return None if row is None or int(row["token"]) == 0 else _lease(row)

    def put_lease(self, delivery: str, holder: str, token: int, expires: float) -> None:
        """Create or overwrite the lease row."""
        self.cur.execute(
            "INSERT INTO execsys_leases (delivery, holder, token, expires) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (delivery) DO UPDATE SET holder = excluded.holder, "
            "token = excluded.token, expires = excluded.expires",
            (delivery, holder, token, expires),
        )

    def holder_has_leases(self, holder: str) -> bool:
        """Whether any lease row names ``holder``."""
        row = self._one("SELECT 1 FROM execsys_leases WHERE holder = %s LIMIT 1", (holder,))
        return row is not None

    def renew_lease(self, delivery: str, holder: str, token: int, expires: float) -> bool:
        """Move the expiry if the lease is still ``holder``'s under ``token``."""
        self.cur.execute(
            "UPDATE execsys_leases SET expires = %s WHERE delivery = %s AND token = %s "
            "AND holder = %s",
            (expires, delivery, token, holder),
        )
        return self.cur.rowcount == 1

    def release_lease(self, delivery: str, holder: str, token: int) -> None:
        """Mark the lease released if it is still ``holder``'s under ``token``."""
        self.cur.execute(
            "UPDATE execsys_leases SET expires = 0 WHERE delivery = %s AND token = %s "
            "AND holder = %s",
            (delivery, token, holder),
        )

    # --- deliveries -------------------------------------------------------------

    def insert_delivery(
        self, delivery: str, graph: str, graph_digest: str, digest: str, document: bytes
    ) -> None:
        """Record a newly admitted delivery (status ``running``)."""
        now = time.time()
        self.cur.execute(
            "INSERT INTO execsys_deliveries (delivery, graph, graph_digest, digest, document, "
            "status, outcome, detail, created, updated) VALUES (%s, %s, %s, %s, %s, 'running', "
            "NULL, '{}', %s, %s)",
            (delivery, graph, graph_digest, digest, document, now, now),
        )

    def delivery(self, delivery: str) -> DeliveryRow | None:
        """The delivery's row as this transaction sees it."""
        return delivery_row(self._one(DELIVERY_SQL, (delivery,)))

    def set_status(
        self,
        delivery: str,
        status: str,
        outcome: str | None,
        detail: dict[str, Any],
        checkpoint: str | None,
    ) -> None:
        """Update the derived status (inside the checkpoint's transaction).

        Queuing a delivery notifies the runners listening for queued work.
        """
        self.cur.execute(
            "UPDATE execsys_deliveries SET status = %s, outcome = %s, detail = %s, "
            "checkpoint = COALESCE(%s, checkpoint), updated = %s WHERE delivery = %s",
            (status, outcome, Jsonb(detail), checkpoint, time.time(), delivery),
        )
        if status == "queued":  # runners LISTENing wake at the commit
            self.cur.execute(NOTIFY_SQL, (delivery,))

    def claim_queued(self, delivery: str, message: str) -> bool:
        """Move a ``queued`` delivery to ``running``; False if it is not queued."""
        self.cur.execute(
            "UPDATE execsys_deliveries SET status = 'running', "
            "detail = jsonb_set(detail, '{message}', to_jsonb(%s::text)), updated = %s "
            "WHERE delivery = %s AND status = 'queued'",
            (message, time.time(), delivery),
        )
        return self.cur.rowcount == 1

    # --- records ------------------------------------------------------------------

    def put_record(self, digest: str, body: bytes) -> None:
        """Store a content-addressed value (idempotent)."""
        self.cur.execute(
            "INSERT INTO execsys_records (digest, body) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (digest, body),
        )

    def put_record_ref(self, delivery: str, digest: str) -> None:
        """Remember that ``delivery`` references a record (retirement keeps shared ones)."""
        self.cur.execute(
            "INSERT INTO execsys_record_refs (delivery, digest) VALUES (%s, %s) "
            "ON CONFLICT DO NOTHING",
            (delivery, digest),
        )

    def put_records(self, delivery: str, records: list[tuple[str, bytes]]) -> None:
        """Every record and its reference in one statement (a step's records travel together)."""
        if not records:
            return
        if len(records) <= VALUES_MAX_ROWS:
            rows = _values("(%s, %b)", len(records))
            self.cur.execute(_PUT_RECORDS_VALUES.format(rows=rows), (*_flat(records), delivery))
            return
        digests, bodies = _columns(records, 2)
        self.cur.execute(PUT_RECORDS_SQL, (digests, bodies, delivery))

    def has_record(self, digest: str) -> bool:
        """Whether the record is stored (this transaction included)."""
        return self._one("SELECT 1 FROM execsys_records WHERE digest = %s", (digest,)) is not None

    # --- journal and checkpoint index ---------------------------------------------

    def journal_lines(self, delivery: str) -> list[bytes]:
        """The delivery's journal lines, header first."""
        return [bytes(r["line"]) for r in self.cur.execute(JOURNAL_SQL, (delivery,)).fetchall()]

    def journal_head(self, delivery: str) -> tuple[str | None, int]:
        """(digest, ordinal) of the last journal line."""
        row = self._one(HEAD_SQL, (delivery,))
        return (None, 0) if row is None else (str(row["digest"]), int(row["ordinal"]))

    def append_journal(self, delivery: str, rows: Iterable[tuple[int, str, bytes]]) -> None:
        """Append journal lines in one statement (the primary key refuses a taken ordinal)."""
        given = list(rows)
        if not given:
            return
        if len(given) <= VALUES_MAX_ROWS:
            values = _values("(%s, %s, %s, %b)", len(given))
            params = [
                p for ordinal, digest, line in given for p in (delivery, ordinal, digest, line)
            ]
            self.cur.execute(_JOURNAL_VALUES.format(rows=values), params)
            return
        ordinals, digests, lines = _columns(given, 3)
        self.cur.execute(_JOURNAL_SQL, (delivery, ordinals, digests, lines))

    def index_checkpoint(
        self, delivery: str, checkpoint: str, savepoint: str | None, events: int
    ) -> None:
        """Record which savepoint and journal length a checkpoint embodies."""
        self.cur.execute(
            "INSERT INTO execsys_checkpoints (delivery, checkpoint, savepoint, events, created) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (delivery, checkpoint) DO UPDATE SET "
            "savepoint = excluded.savepoint, events = excluded.events, created = excluded.created",
            (delivery, checkpoint, savepoint, events, time.time()),
        )

    # --- LangGraph's tables (used by the checkpointer in its own transaction) --------

    def put_checkpoint(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        parent_id: str | None,
        checkpoint: dict[str, Any],
        metadata: dict[str, Any],
        body: tuple[str, bytes],
    ) -> None:
        """Write a checkpoint: its body, and its row in LangGraph's ``checkpoints`` table.

        ``body`` is the saver's (type, bytes): the whole checkpoint, or its delta
        from ``parent_id``. ``checkpoint`` is the row's JSONB, which names the
        checkpoint but holds none of its state (decision 0155); ``metadata`` is
        stored as LangGraph stores it, so its filters still apply.
        """
        self.cur.execute(
            _BODY_SQL, (thread_id, checkpoint_ns, checkpoint_id, parent_id, body[0], body[1])
        )
        self.cur.execute(
            _CHECKPOINT_SQL,
            (
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                parent_id,
                Jsonb(checkpoint),
                Jsonb(metadata),
            ),
        )

    def put_writes(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Write the saver's ``_dump_writes`` rows into ``checkpoint_writes``."""
        self.cur.executemany(_WRITES_SQL, rows)

    # --- stop requests and retirement -----------------------------------------------

    def request_stop(self, delivery: str, requested: float, actor: str) -> None:
        """Record (or replace) a stop request."""
        self.cur.execute(
            "INSERT INTO execsys_stops (delivery, requested, actor) VALUES (%s, %s, %s) "
            "ON CONFLICT (delivery) DO UPDATE SET requested = excluded.requested, "
            "actor = excluded.actor",
            (delivery, requested, actor),
        )

    def clear_stop(self, delivery: str) -> None:
        """Forget a stop request."""
        self.cur.execute("DELETE FROM execsys_stops WHERE delivery = %s", (delivery,))

    def retirement(self, delivery: str) -> tuple[str, dict[str, Any]] | None:
        """(authorization, fact) of the delivery's retirement, if any."""
        row = self._one(
            'SELECT "authorization", fact FROM execsys_retirements WHERE delivery = %s',
            (delivery,),
        )
        return None if row is None else (str(row["authorization"]), json.loads(row["fact"]))

    def retire(self, delivery: str, authorization: str, fact: dict[str, Any], outcome: str) -> None:
        """Delete the delivery's checkpoints and unshared records; keep the fact."""
        cur = self.cur
        for table in (
            "checkpoints",
            "checkpoint_blobs",
            "checkpoint_writes",
            "execsys_checkpoint_bodies",
        ):
            cur.execute(f"DELETE FROM {table} WHERE thread_id = %s".encode(), (delivery,))
        cur.execute("DELETE FROM execsys_checkpoints WHERE delivery = %s", (delivery,))
        cur.execute(
            "DELETE FROM execsys_records WHERE digest IN (SELECT digest FROM execsys_record_refs "
            "WHERE delivery = %s) AND digest NOT IN (SELECT digest FROM execsys_record_refs "
            "WHERE delivery != %s)",
            (delivery, delivery),
        )
        cur.execute("DELETE FROM execsys_record_refs WHERE delivery = %s", (delivery,))
        cur.execute(
            'INSERT INTO execsys_retirements (delivery, "authorization", fact) VALUES (%s, %s, %s)',
            (delivery, authorization, json.dumps(fact, sort_keys=True).encode()),
        )
        cur.execute(
            "UPDATE execsys_deliveries SET status = 'retired', outcome = %s, updated = %s "
            "WHERE delivery = %s",
            (outcome, time.time(), delivery),
        )


PUT_RECORDS_SQL = (
    "WITH given AS (SELECT DISTINCT ON (digest) digest, body "
    "FROM unnest(%b::text[], %b::bytea[]) AS g(digest, body)), "
    "stored AS (INSERT INTO execsys_records (digest, body) SELECT digest, body FROM given "
    "ON CONFLICT DO NOTHING) "
    "INSERT INTO execsys_record_refs (delivery, digest) SELECT %s, digest FROM given "
    "ON CONFLICT DO NOTHING"
)
"""A step's records and their references: one statement, both tables."""


VALUES_MAX_ROWS = 64
"""Up to this many rows, a multi-row write lists them as ``VALUES`` of plain parameters.

psycopg converts a plain parameter in C but an array in Python (about 20 us for six
columns of a few rows against 4 us as values); past this many rows the statement
keeps one array per column, whose size does not grow the parameter count."""

_JOURNAL_VALUES = "INSERT INTO execsys_journal (delivery, ordinal, digest, line) VALUES {rows}"
_PUT_RECORDS_VALUES = (
    "WITH given AS (SELECT DISTINCT ON (digest) digest, body "
    "FROM (VALUES {rows}) AS g(digest, body)), "
    "stored AS (INSERT INTO execsys_records (digest, body) SELECT digest, body FROM given "
    "ON CONFLICT DO NOTHING) "
    "INSERT INTO execsys_record_refs (delivery, digest) SELECT %s, digest FROM given "
    "ON CONFLICT DO NOTHING"
)


@functools.lru_cache(maxsize=256)
def _values(row: str, count: int) -> str:
    """``count`` copies of the placeholder tuple ``row``, comma-separated."""
    return ", ".join([row] * count)


def _flat(rows: Iterable[Sequence[Any]]) -> list[Any]:
    return [value for row in rows for value in row]


def _columns(rows: Iterable[Sequence[Any]], width: int) -> list[list[Any]]:
    """Rows turned into ``width`` column lists (the arrays a multi-row ``unnest`` insert takes)."""
    columns: list[list[Any]] = [[] for _ in range(width)]
    for row in rows:
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    return columns


def _lease(row: DictRow | None) -> LeaseRow | None:
    if row is None:
        return None
    return LeaseRow(str(row["holder"]), int(row["token"]), float(row["expires"]))


def delivery_row(row: DictRow | None) -> DeliveryRow | None:
    """A stored delivery row in the port's shape."""
    if row is None:
        return None
    detail = row["detail"]
    return DeliveryRow(
        delivery=row["delivery"],
        graph=row["graph"],
        graph_digest=row["graph_digest"],
        digest=row["digest"],
        document=bytes(row["document"]),
        status=row["status"],
        outcome=row["outcome"],
        detail=dict(detail) if isinstance(detail, dict) else json.loads(detail or "{}"),
        checkpoint=row["checkpoint"],
        created=float(row["created"]),
        updated=float(row["updated"]),
    )


def listed(rows: Sequence[DictRow]) -> list[ListedDelivery]:
    """Listing rows in the port's shape."""
    return [
        ListedDelivery(
            delivery=r["delivery"],
            graph=r["graph"],
            status=r["status"],
            outcome=r["outcome"],
            updated=float(r["updated"]),
        )
        for r in rows
    ]
