"""The PostgreSQL backend of the storage port: the Host's tables beside LangGraph's, one database.

Every SQL string of this backend lives in this package, the statements the
checkpointer adds to its own transaction included (``_tx.py``). A process
holds one pool of connections; each transaction checks one out, so a runner
can drive several deliveries at once. Connections are autocommit outside an
explicit transaction and keep no session state but one: a step's statement is
prepared once its text repeats (decision 0153), which a transaction pooler
must carry across its server connections or the URL must turn off
(``execsys_prepare=off``).
"""

from __future__ import annotations

import json
import logging
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

from contracts import ErrorCode, error
from host.storage._fencing import fenced
from host.storage._port import DeliveryRow, LeaseRow, ListedDelivery, RunnerRow
from host.storage.postgres._archive import PostgresCustodyArchive
from host.storage.postgres._batch import StepCursor
from host.storage.postgres._connect import SETTINGS, connect, conninfo, prepares
from host.storage.postgres._goals import PostgresGoalReads
from host.storage.postgres._leases import FIRST_GRANT, fenced_token
from host.storage.postgres._listen import QueueListener
from host.storage.postgres._migrations import SubstrateSetup, migrate, require_current
from host.storage.postgres._tx import (
    CHAIN_SQL,
    DELIVERY_SQL,
    HEAD_SQL,
    JOURNAL_SQL,
    PostgresTx,
    delivery_row,
    listed,
)

# The pool logs a warning when it discards a connection the server closed, and a
# pipeline one when it ends on a lost connection (a step's commit); the failure
# itself reaches the user as one catalogued error line, so those logs stay quiet.
for _name in ("psycopg", "psycopg.pool"):
    logging.getLogger(_name).addHandler(logging.NullHandler())
    logging.getLogger(_name).propagate = False

POOL_SIZE = 8
"""Connections per process at most (one per delivery driven at once, plus reads)."""
IDLE_CHECK_S = 1.0
"""A pooled connection idle longer than this is probed before it is handed out."""


class _ProbingPool(ConnectionPool[psycopg.Connection[DictRow]]):
    """A pool that probes a connection before reuse once it has been idle a while.

    A server restart leaves every pooled connection broken, and the pool only
    learns so when one fails: without a probe the first transaction after the
    restart (a step's commit, say) fails. A connection used again within
    ``IDLE_CHECK_S`` is handed out as is, so a busy runner pays nothing; one
    that sat idle costs one empty round trip, and a broken one is replaced.

    The time a connection comes back is noted in ``putconn``, on the caller's
    thread. (The pool's own ``reset`` hook would do it too, but a pool with that
    hook hands every returned connection to a worker thread: a thread switch per
    statement, and a connection that is briefly not back when the next
    statement asks for one.)
    """

    def __init__(self, conninfo: str, **kwargs: Any) -> None:
        self.returned: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
        super().__init__(conninfo, check=self.probe, **kwargs)

    def putconn(self, conn: psycopg.Connection[DictRow]) -> None:
        """Note when ``conn`` came back, then return it to the pool."""
        self.returned[conn] = time.monotonic()
        super().putconn(conn)

    def probe(self, conn: psycopg.Connection[DictRow]) -> None:
        """Raise if ``conn``, idle a while, no longer reaches the server."""
        if time.monotonic() - self.returned.get(conn, 0.0) > IDLE_CHECK_S:
            ConnectionPool.check_connection(conn)


ASYNC_COMMIT = "SELECT set_config('synchronous_commit', 'off', true)"
"""The first part of a lease transaction: its commit does not wait for the WAL flush."""


class PostgresStorage(PostgresGoalReads):
    """The Host's tables in one PostgreSQL database, through a pool of connections."""

    errors: tuple[type[BaseException], ...] = (psycopg.Error,)

    def __init__(self, url: str, *, substrate_setup: SubstrateSetup | None = None) -> None:
        self.url = url
        self.substrate_setup = substrate_setup
        """Creates the substrate's tables in :meth:`setup`'s transaction (the checkpointer's)."""
        self.pool: ConnectionPool[psycopg.Connection[DictRow]] = _ProbingPool(
            conninfo(url),
            min_size=1,
            max_size=POOL_SIZE,
            kwargs=SETTINGS,
            open=False,
            name="execsys",
        )
        self.pool.open(wait=False)
        self.archive = PostgresCustodyArchive(self)
        """Custody's savepoints for runners that share no data folder (``host/_archive.py``)."""
        self.prepare = prepares(url)
        """Whether a step's statement is prepared once per connection (decision 0153).

        Off when the URL says ``execsys_prepare=off``, and from the first time the
        server shows it does not keep a connection's prepared statements."""

    @classmethod
    def open(
        cls, url: str, *, readonly: bool = False, substrate_setup: SubstrateSetup | None = None
    ) -> PostgresStorage:
        """Open the store at ``url``: reachable, ours, not newer; a reader needs it migrated.

        Every way a server or database can be wrong is one catalogued error here,
        before the pool opens (which would only retry and time out).
        """
        with connect(url) as probe:
            if readonly:
                require_current(probe, url)
        return cls(url, substrate_setup=substrate_setup)

    def setup(self) -> None:
        """Bring the schema to this release's (a no-op on a current store)."""
        migrate(self.url, self.substrate_setup)

    @contextmanager
    def transaction(self, *, flush: bool = True) -> Iterator[PostgresTx]:
        """One write transaction on one pooled connection; rolled back if the body raises.

        ``flush=False``: its commit does not wait for the WAL flush
        (``synchronous_commit`` off for this transaction alone).
        """
        with self.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            if not flush:
                cur.execute(ASYNC_COMMIT)
            yield PostgresTx(cur)

    @contextmanager
    def step_transaction(self, *, flush: bool = True) -> Iterator[PostgresTx]:
        """A write transaction sent as ONE statement (decision 0146).

        For a step's commit (the checkpointer's ``put``): the fencing check
        (:meth:`PostgresTx.fence`) and every write become the parts of one
        ``WITH`` statement on an autocommit connection, one round trip with no
        BEGIN or COMMIT; it applies whole or not at all, and a failing part (a
        stale token, a taken journal ordinal, a lost connection) applies
        nothing. A read in the body turns it into an ordinary transaction
        (:class:`StepCursor`). Nothing is sent if the body raises. ``flush`` as
        for :meth:`transaction`.
        """
        with self._one_statement(counted=True, first="" if flush else ASYNC_COMMIT) as tx:
            yield tx

    @contextmanager
    def _one_statement(self, *, counted: bool, first: str = "") -> Iterator[PostgresTx]:
        with self.pool.connection() as conn:
            step = StepCursor(conn, counted=counted, prepare=self.prepare)
            try:
                if first:
                    step.execute(first)
                yield PostgresTx(step)  # type: ignore[arg-type]
            except BaseException as exc:
                step.abandon(exc)
                raise
            step.finish()
            if self.prepare and not step.prepare:
                self.prepare = False

    @contextmanager
    def fenced_transaction(
        self, delivery: str, token: int, *, flush: bool = True
    ) -> Iterator[PostgresTx]:
        """A step transaction (one statement) that begins with the fencing check.

        A stale token (``execsys_fence``'s SQLSTATE ``EXF01``) raises ``LEASE_FENCED``
        naming the current token, and nothing of the body is applied.
        """
        try:
            with self.step_transaction(flush=flush) as tx:
                tx.fence(delivery, token)
                yield tx
        except psycopg.Error as exc:
            found = fenced_token(exc)
            if found is None:
                raise
            raise fenced(delivery, found or None) from None

    @contextmanager
    def lease_transaction(self) -> Iterator[PostgresTx]:
        """A transaction of lease rows alone: one statement, committed without a WAL flush wait.

        A release is one ``UPDATE`` and goes as one statement (BEGIN and COMMIT
        would double its round trips); a body that reads (a grant, a renewal)
        becomes an ordinary transaction. ``synchronous_commit`` is off for it
        alone, as the port allows: a lease write lost to a server crash was
        never relied on, since the first fenced write under a token waits for
        the flush of everything committed before it (decision 0148).
        """
        with self._one_statement(counted=False, first=ASYNC_COMMIT) as tx:
            yield tx

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[DictRow]]:
        """A pooled connection (the checkpointer's reads)."""
        with self.pool.connection() as conn:
            yield conn

    def read(self, sql: Any, params: tuple[Any, ...] = ()) -> list[DictRow]:
        """Run a read query (this backend's own; not part of the port)."""
        with self.pool.connection() as conn:
            return list(conn.execute(sql, params).fetchall())

    # --- deliveries -------------------------------------------------------------

    def delivery(self, delivery: str) -> DeliveryRow | None:
        """The delivery's row, or None."""
        rows = self.read(DELIVERY_SQL, (delivery,))
        return delivery_row(rows[0] if rows else None)

    def deliveries(self) -> list[ListedDelivery]:
        """Every delivery, newest first."""
        return listed(
            self.read(
                "SELECT delivery, graph, status, outcome, updated FROM execsys_deliveries "
                "ORDER BY updated DESC"
            )
        )

    def queued(self, limit: int) -> list[str]:
        """Up to ``limit`` ``queued`` deliveries, longest waiting first.

        Rows another runner is claiming right now are skipped, not waited for.
        """
        with self.pool.connection() as conn, conn.transaction():
            rows = conn.execute(
                "SELECT delivery FROM execsys_deliveries WHERE status = 'queued' "
                "ORDER BY updated, delivery LIMIT %s FOR UPDATE SKIP LOCKED",
                (limit,),
            ).fetchall()
        return [str(row["delivery"]) for row in rows]

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
        params = (status, status, graph, graph, changed_since, changed_since)
        condition = (
            " WHERE (%s::text IS NULL OR status = %s) AND (%s::text IS NULL OR graph = %s)"
            " AND (%s::float8 IS NULL OR updated >= %s)"
        )
        total = self.read("SELECT COUNT(*) AS n FROM execsys_deliveries" + condition, params)
        rows = self.read(
            "SELECT delivery, graph, status, outcome, updated FROM execsys_deliveries"
            + condition
            + " ORDER BY updated DESC, delivery DESC LIMIT %s OFFSET %s",
            (*params, limit, offset),
        )
        return listed(rows), int(total[0]["n"])

    # --- records, checkpoints, journal ---------------------------------------------

    def savepoint_checkpoints(self, delivery: str) -> list[dict[str, Any]]:
        """Each savepoint the delivery's checkpoints embodied: its latest checkpoint."""
        rows = self.read(
            "SELECT savepoint, checkpoint, events, created FROM execsys_checkpoints "
            "WHERE delivery = %s AND savepoint IS NOT NULL ORDER BY checkpoint",
            (delivery,),
        )
        latest: dict[str, dict[str, Any]] = {}
        for r in rows:
            savepoint = r["savepoint"]
            latest.setdefault(
                savepoint,
                {"savepoint": savepoint, "first": r["checkpoint"], "created": r["created"]},
            )
            latest[savepoint].update({"checkpoint": r["checkpoint"], "events": r["events"]})
        return list(latest.values())

    def checkpoint_events(self, delivery: str, checkpoint: str) -> int:
        """The journal length a checkpoint was committed with (0 if unknown)."""
        rows = self.read(
            "SELECT events FROM execsys_checkpoints WHERE delivery = %s AND checkpoint = %s",
            (delivery, checkpoint),
        )
        return int(rows[0]["events"]) if rows else 0

    def get_record(self, digest: str) -> Any:
        """Load a content-addressed value."""
        rows = self.read("SELECT body FROM execsys_records WHERE digest = %s", (digest,))
        if not rows:
            raise error(ErrorCode.STORE_ERROR, f"record {digest} is missing", path=digest)
        return json.loads(bytes(rows[0]["body"]))

    def journal_lines(self, delivery: str) -> list[bytes]:
        """The delivery's journal, header first, in ordinal order."""
        return [bytes(r["line"]) for r in self.read(JOURNAL_SQL, (delivery,))]

    def journal_head(self, delivery: str) -> tuple[str | None, int]:
        """(head digest, event count) of the stored journal."""
        rows = self.read(HEAD_SQL, (delivery,))
        if not rows:
            return None, 0
        return str(rows[0]["digest"]), int(rows[0]["ordinal"])

    def latest_checkpoint(self, delivery: str) -> str | None:
        """The id of the thread's latest root checkpoint (LangGraph ids sort by time)."""
        rows = self.read(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' "
            "ORDER BY checkpoint_id DESC LIMIT 1",
            (delivery,),
        )
        return str(rows[0]["checkpoint_id"]) if rows else None

    def checkpoint_chain(
        self, thread: str, ns: str, checkpoint: str, delta_prefix: str, limit: int
    ) -> dict[str, tuple[str, bytes]]:
        """Checkpoint bodies from ``checkpoint`` back through its parents, by id (decision 0155).

        The walk stops after the first body whose type does not start with
        ``delta_prefix`` (a whole checkpoint), or after ``limit`` bodies: one
        round trip for what decoding a delta needs.
        """
        rows = self.read(CHAIN_SQL, (thread, ns, checkpoint, thread, ns, delta_prefix, limit))
        return {str(r["checkpoint_id"]): (str(r["type"]), bytes(r["body"])) for r in rows}

    def stop_request(self, delivery: str) -> str | None:
        """The actor text of a pending stop request."""
        rows = self.read("SELECT actor FROM execsys_stops WHERE delivery = %s", (delivery,))
        return None if not rows else str(rows[0]["actor"])

    def retirement_fact(self, delivery: str) -> dict[str, Any] | None:
        """The retirement fact, if the delivery was retired."""
        rows = self.read("SELECT fact FROM execsys_retirements WHERE delivery = %s", (delivery,))
        if not rows:
            return None
        fact: dict[str, Any] = json.loads(bytes(rows[0]["fact"]))
        return fact

    def lease(self, delivery: str) -> LeaseRow | None:
        """The delivery's lease row (None before its first grant)."""
        rows = self.read(
            "SELECT holder, token, expires FROM execsys_leases WHERE delivery = %s AND token > 0",
            (delivery,),
        )
        if not rows:
            return None
        r = rows[0]
        return LeaseRow(str(r["holder"]), int(r["token"]), float(r["expires"]))

    def grant_first_lease(self, delivery: str, holder: str, expires: float) -> bool:
        """Token 1 for ``holder`` unless the delivery is stored or was leased: one statement."""
        with self.pool.connection() as conn:
            cur = conn.execute(FIRST_GRANT, (delivery, holder, expires, delivery))
            return cur.rowcount == 1

    # --- runners ----------------------------------------------------------------

    def beat_runner(self, name: str, host: str, pid: int, started: float) -> None:
        """Record a runner's heartbeat now."""
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO execsys_runners (name, host, pid, started, heartbeat) "
                "VALUES (%s, %s, %s, to_timestamp(%s), clock_timestamp()) ON CONFLICT (name) "
                "DO UPDATE SET host = excluded.host, pid = excluded.pid, "
                "started = excluded.started, heartbeat = excluded.heartbeat",
                (name, host, pid, started),
            )

    def drop_runner(self, name: str) -> None:
        """Remove a runner's row."""
        with self.pool.connection() as conn:
            conn.execute("DELETE FROM execsys_runners WHERE name = %s", (name,))

    def runners(self) -> list[RunnerRow]:
        """Every runner row, by name, with the deliveries its process holds leases on."""
        rows = self.read(
            "SELECT name, host, pid, extract(epoch FROM started)::float8 AS started, "
            "extract(epoch FROM heartbeat)::float8 AS heartbeat FROM execsys_runners "
            "ORDER BY name"
        )
        leases = self.read(
            "SELECT delivery, holder FROM execsys_leases WHERE expires > %s ORDER BY delivery",
            (time.time(),),
        )
        listed: list[RunnerRow] = []
        for r in rows:
            prefix = f"{r['host']}:{r['pid']}:"
            held = [str(x["delivery"]) for x in leases if str(x["holder"]).startswith(prefix)]
            listed.append(
                RunnerRow(
                    name=str(r["name"]),
                    host=str(r["host"]),
                    pid=int(r["pid"]),
                    started=float(r["started"]),
                    heartbeat=float(r["heartbeat"]),
                    deliveries=held,
                )
            )
        return listed

    def queue_listener(self) -> QueueListener:
        """A listener a runner starts to wake when a delivery is queued (its own connection)."""
        return QueueListener(self.url)

    def close(self) -> None:
        """Close the pool's connections."""
        self.pool.close()
