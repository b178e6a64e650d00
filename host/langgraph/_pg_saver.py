"""LangGraph's PostgresSaver for the Host: the Host's rows and the fencing check in its transaction.

The stock saver sends the blob upserts and the checkpoint upsert on an
autocommit connection and offers no hook for more rows. :class:`PgHostSaver`
writes, in ONE transaction of the storage port on one pooled connection, the
fencing check (the lease row ``FOR SHARE``; a stale token aborts the commit,
decision 0144), the checkpoint, and the step's records, journal lines and
status, all sent as one statement (decision 0146). A refused token or a
connection killed mid-way applies none of it.

A checkpoint is stored as the SQLite saver stores it: whole, or as a delta of
its parent (:mod:`host.langgraph._delta`), in the Host's table
``execsys_checkpoint_bodies``; LangGraph's ``checkpoints`` row keeps its place
in the thread and its metadata, not its state (decision 0155). So a long
delivery's store grows with what its steps change, not with the product of its
length and its state. Rows stored in the stock layout before that (no body)
are still read the stock way.

Ordinary task writes are not stored (the checkpoint carries their effect,
docs/decisions/0008-no-separate-task-writes.md); errors, interrupts and the
other special writes are, fenced like ``put``.

Relies on private parts of langgraph-checkpoint-postgres 3.2.x (hence the pin
in pyproject.toml): the methods ``_dump_writes`` and ``_load_checkpoint_tuple``,
the class attributes ``MIGRATIONS`` and ``SELECT_SQL`` (its ``from checkpoints``
clause, where a column is added), and the ``_load_blobs`` answer to no rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.rows import DictRow

from contracts import ErrorCode, error
from host import _faults
from host._journal_book import JournalBook
from host._lease import check_token as host_check_token
from host._step_rows import StatusDeriver, needs_flush, write_step_rows
from host.langgraph._async_saver import SyncTwins
from host.langgraph._delta import MAX_DEPTH, PREFIX, DeltaCodec, Fetch
from host.langgraph._fresh import FreshThreads
from host.storage import fenced
from host.storage.postgres import BODY_COLUMN, PostgresStorage, PostgresTx

_STOCK_FROM = "from checkpoints "
if PostgresSaver.SELECT_SQL.count(_STOCK_FROM) != 1:  # pragma: no cover - a library change
    raise ImportError("langgraph-checkpoint-postgres: SELECT_SQL is not the one this saver extends")

_T = TypeVar("_T")


async def off_loop(call: Callable[..., _T], *args: Any) -> _T:
    """Run ``call(*args)`` in a worker thread; a cancellation waits for it to end.

    The store call blocks on the server's round trips; in a worker thread the
    event loop drives other deliveries meanwhile. A cancelled caller (a lost
    lease stops a run) still waits for the call to commit or roll back, exactly
    as when the call ran on the loop's thread: whoever cleans up after the
    cancellation (forgetting a cached journal) comes after the write, never
    during it. A write in flight after a takeover is fenced by the token.
    """
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    future = loop.run_in_executor(None, functools.partial(context.run, call, *args))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([future])
        if not future.cancelled():
            # The caller is gone: take the call's failure here (a lost server is
            # already reported by the run), or asyncio prints it as never retrieved.
            future.exception()
        raise


def setup_checkpoint_tables(conn: psycopg.Connection[DictRow]) -> None:
    """Apply LangGraph's checkpoint migrations inside the caller's transaction.

    The library's own ``setup()`` runs them one by one outside any transaction
    (it builds indexes ``CONCURRENTLY``); two runners migrating at once then race
    on its version table, and a concurrent build can wait forever on the other
    migrator's lock. Here the same statements run without ``CONCURRENTLY``, under
    the Host's schema lock, recorded in the library's ``checkpoint_migrations``
    exactly as ``setup()`` records them, so a later ``setup()`` finds nothing to do.
    A store that a newer library migrated is refused: this release would misread it.
    """
    migrations = PostgresSaver.MIGRATIONS
    conn.execute(migrations[0].encode())
    row = conn.execute("SELECT max(v) AS v FROM checkpoint_migrations").fetchone()
    done = int(row["v"]) if row and row["v"] is not None else -1
    if done >= len(migrations):
        raise error(
            ErrorCode.STORE_SCHEMA_NEWER,
            f"the checkpoint tables are at migration {done}, newer than this "
            f"release's {len(migrations) - 1}",
            path="checkpoint_migrations",
            expected="an execsys release with the same or a newer checkpoint library",
        )
    for version in range(done + 1, len(migrations)):
        conn.execute(migrations[version].replace("CONCURRENTLY ", "").encode())
        conn.execute("INSERT INTO checkpoint_migrations (v) VALUES (%s)", (version,))


class PgHostSaver(FreshThreads, SyncTwins, PostgresSaver):
    """The Host's checkpointer on PostgreSQL: LangGraph's PostgresSaver plus the Host's rows.

    ``put`` writes, in ONE transaction of the storage port on one pooled
    connection: the fencing check (the lease row ``FOR SHARE``), the checkpoint's
    blobs and row exactly as the stock saver stores them, and the Host's rows of
    the step (:func:`host._step_rows.write_step_rows`). Reads are the stock
    saver's, on the same pool. Async methods run the synchronous ones in a
    worker thread (:func:`off_loop`), so a runner's ``--concurrency`` deliveries
    overlap their commits' round trips instead of queuing on the event loop;
    a checkpoint of the only delivery this process is running commits on the
    loop's thread, where the hop would only cost CPU (decision 0138).
    """

    def __init__(
        self, store: PostgresStorage, journals: JournalBook, derive_status: StatusDeriver
    ) -> None:
        super().__init__(store.pool)
        self.store = store
        self.journals = journals
        self.derive_status = derive_status
        self.tokens: dict[str, int] = {}
        """delivery -> the fencing token this process holds."""
        self.fresh = set()
        self.codec = DeltaCodec(self.serde, self._fetch_one)

    SELECT_SQL = PostgresSaver.SELECT_SQL.replace(_STOCK_FROM, BODY_COLUMN + _STOCK_FROM)
    """The stock query of checkpoint rows, plus each row's body (``execsys_body``)."""

    def setup(self) -> None:
        """Nothing: the store's migrations created the checkpoint tables."""

    async def _twin(self, call: Callable[..., _T], *args: Any) -> _T:
        """Run an async twin's synchronous call in a worker thread when that can pay off.

        Two calls stay on the loop's thread (decision 0138): a checkpoint of the
        only delivery this process is running (nothing else on the loop waits
        for its commit, and the hop, a wake-up each way and the GIL handed over
        twice, costs more CPU than it saves), and task writes with no error or
        interrupt among them (``put_writes`` then touches no connection).
        """
        if call == self.put and len(self.tokens) <= 1:
            return call(*args)
        if call == self.put_writes and not any(w[0] in WRITES_IDX_MAP for w in args[1]):
            return call(*args)
        return await off_loop(call, *args)

    @contextlib.contextmanager
    def _fenced(self, delivery: str, *, flush: bool = True) -> Iterator[PostgresTx]:
        """The store's fenced transaction under this process's token for ``delivery``."""
        token = self.tokens.get(delivery)
        if token is None:
            with self.store.transaction() as tx:
                host_check_token(tx, delivery, token)  # refused, naming the current token
            raise fenced(delivery, None)  # not reached: the check refuses a missing token
        with self.store.fenced_transaction(delivery, token, flush=flush) as tx:
            yield tx

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Write the checkpoint and everything that rides with it, atomically."""
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        checkpoint_ns = str(configurable.get("checkpoint_ns", ""))
        parent_id = configurable.get("checkpoint_id")
        type_, blob, remembered = self.codec.encode(
            thread_id, checkpoint_ns, parent_id, checkpoint, new_versions
        )
        # The row names the checkpoint; its state is the body (decision 0155).
        row = {"v": checkpoint["v"], "id": checkpoint["id"], "ts": checkpoint["ts"]}
        values: dict[str, Any] = dict(checkpoint.get("channel_values") or {})
        outbox = values.get("outbox") if "outbox" in new_versions else None
        more = metadata.get("source") == "input" or any(
            str(ch).startswith("branch:to:") for ch in values
        )
        flush = checkpoint_ns != "" or needs_flush(metadata.get("source"), outbox, more)
        try:
            with self._fenced(thread_id, flush=flush) as tx:
                tx.put_checkpoint(
                    thread_id,
                    checkpoint_ns,
                    checkpoint["id"],
                    parent_id,
                    row,
                    dict(get_serializable_checkpoint_metadata(config, metadata)),
                    (type_, blob),
                )
                if checkpoint_ns == "":
                    write_step_rows(
                        tx,
                        self.journals,
                        self.derive_status,
                        thread_id,
                        checkpoint["id"],
                        values,
                        outbox,
                        more,
                    )
                _faults.boundary("put", "before")
        except BaseException:
            # Pipelined statements fail at the COMMIT, after the journal was appended
            # in memory: drop it, so it is read again from what the store kept.
            self.journals.forget(thread_id)
            raise
        self.codec.wrote(thread_id, checkpoint_ns, remembered)
        _faults.boundary("put", "after")
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's special writes (errors, interrupts), fenced like ``put``."""
        thread_id = str(config["configurable"]["thread_id"])
        self.codec.saw_writes(
            thread_id,
            str(config["configurable"].get("checkpoint_ns", "")),
            config["configurable"].get("checkpoint_id"),
            writes,
        )
        special = [w for w in writes if w[0] in WRITES_IDX_MAP]
        if not special:
            _faults.boundary("put_writes", "before")
            _faults.boundary("put_writes", "after")
            return
        rows = self._dump_writes(
            thread_id,
            str(config["configurable"]["checkpoint_ns"]),
            str(config["configurable"]["checkpoint_id"]),
            task_id,
            task_path,
            special,
        )
        with self._fenced(thread_id) as tx:
            tx.put_writes(rows)
            _faults.boundary("put_writes", "before")
        _faults.boundary("put_writes", "after")

    def _load_checkpoint_tuple(self, value: DictRow) -> CheckpointTuple:
        """The stock conversion of a row, its checkpoint decoded from the row's body first."""
        body = value.get("execsys_body")
        if body is not None:
            thread, ns = str(value["thread_id"]), str(value["checkpoint_ns"])
            value["checkpoint"] = self.codec.decode(
                bytes(body[0]).decode(), bytes(body[1]), self._chain_fetch(thread, ns)
            )
            value["channel_values"] = None  # no blob rows: the body holds every channel
        return super()._load_checkpoint_tuple(value)

    def _chain_fetch(self, thread: str, ns: str) -> Fetch:
        """A fetch for one decode: its first call reads the parent's whole chain at once."""
        read: dict[str, tuple[str, bytes]] = {}

        def fetch(thread_id: str, checkpoint_ns: str, checkpoint: str) -> tuple[str, bytes] | None:
            if (thread_id, checkpoint_ns) != (thread, ns):
                return self._fetch_one(thread_id, checkpoint_ns, checkpoint)
            if checkpoint not in read:
                read.update(
                    self.store.checkpoint_chain(thread, ns, checkpoint, PREFIX, MAX_DEPTH + 2)
                )
            return read.get(checkpoint)

        return fetch

    def _fetch_one(self, thread: str, ns: str, checkpoint: str) -> tuple[str, bytes] | None:
        """One checkpoint's stored body, or None."""
        return self.store.checkpoint_chain(thread, ns, checkpoint, PREFIX, 1).get(checkpoint)
