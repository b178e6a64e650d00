"""The checkpointer: LangGraph's SqliteSaver, plus everything that must commit with it.

``put`` writes, in ONE SQLite transaction: the checkpoint; the records the
step produced; the step's journal events (chained onto the stored head and
checked against the journal's rules); the delivery's derived status; and a
check of the writer's fencing token. Either all of it is durable or none of it
is, which is what lets ``inspect`` promise that checkpoint and journal agree.

The stock saver commits even when its body raises and offers no async
methods; both are fixed here. Async methods call the synchronous ones directly:
each is one short transaction, and one connection serializes them anyway.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)

from contracts import canonical_bytes
from host import _faults
from host.langgraph._async_saver import SyncBackedSaver
from host.langgraph._delta import DeltaCodec, DeltaSerde
from host.langgraph._journal_book import JournalBook
from host.langgraph._lease import check_token
from host.langgraph._store import Store

StatusDeriver = Callable[[dict[str, Any], bool], tuple[str, str | None, dict[str, Any]]]


class HostSaver(SyncBackedSaver):
    """SqliteSaver that commits the Host's records, journal and status with each checkpoint."""

    def __init__(
        self,
        store: Store,
        journals: JournalBook,
        derive_status: StatusDeriver,
    ) -> None:
        super().__init__(store.conn)
        self.lock = store.lock  # one lock for every write on the shared connection
        self.store = store
        self.journals = journals
        self.derive_status = derive_status
        self.tokens: dict[str, int] = {}
        """delivery -> the fencing token this process holds."""
        self._local = threading.local()
        self.codec = DeltaCodec(self.serde, self._stored)
        self.serde = DeltaSerde(self.serde, self.codec)

    def _stored(self, thread: str, ns: str, checkpoint_id: str) -> tuple[str, bytes] | None:
        """One stored checkpoint row's (type, blob); called with the lock already held."""
        row = self.conn.execute(
            "SELECT type, checkpoint FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            (thread, ns, checkpoint_id),
        ).fetchone()
        return None if row is None else (str(row[0]), bytes(row[1]))

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[Any]:
        """Like the stock cursor, but a failing body rolls back instead of committing."""
        with self.lock:
            self.setup()
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

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Write the checkpoint and everything that rides with it, atomically."""
        thread_id = str(config["configurable"]["thread_id"])
        checkpoint_ns = str(config["configurable"].get("checkpoint_ns", ""))
        parent_id = config["configurable"].get("checkpoint_id")
        type_, blob, remembered = self.codec.encode(thread_id, checkpoint_ns, parent_id, checkpoint)
        meta = json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False).encode(
            "utf-8", "ignore"
        )
        values: dict[str, Any] = dict(checkpoint.get("channel_values") or {})
        outbox = values.get("outbox") if "outbox" in new_versions else None
        # Work is still scheduled when a trigger channel holds an unconsumed value.
        more = metadata.get("source") == "input" or any(
            str(ch).startswith("branch:to:") for ch in values
        )
        with self.cursor() as cur:
            self._fence(cur, thread_id)
            cur.execute(
                "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
                "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    thread_id,
                    checkpoint_ns,
                    checkpoint["id"],
                    parent_id,
                    type_,
                    blob,
                    meta,
                ),
            )
            if checkpoint_ns == "":
                drafts = []
                for item in outbox or ():
                    if item.get("type") == "record":
                        self.store.put_record(cur, item["digest"], canonical_bytes(item["value"]))
                    elif item.get("type") in {"event", "invalidate"}:
                        drafts.append(item)
                    if item.get("type") == "record":
                        self.store.put_record_ref(cur, thread_id, item["digest"])
                journal = (
                    self.journals.append(cur, thread_id, drafts)
                    if drafts
                    else self.journals.journal(thread_id, cur)
                )
                status, outcome, detail = self.derive_status(values, more)
                # What this checkpoint embodies, recorded with it: the journal head it
                # was committed with and the custody savepoint it expects.
                detail["journal"] = {"head": journal.head, "events": len(journal)}
                self.store.set_status(cur, thread_id, status, outcome, detail, checkpoint["id"])
                self.store.index_checkpoint(
                    cur, thread_id, checkpoint["id"], detail.get("savepoint"), len(journal)
                )
            _faults.boundary("put", "before")
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
        """Store a task's *special* pending writes (errors, interrupts), fenced like ``put``.

        A task's ordinary writes are not stored on their own: the step's checkpoint
        carries their effect, committed with its journal events in one transaction.
        This saves one commit (one fsync) per step; the price is that after a hard
        crash the whole interrupted step runs again, finished siblings included,
        with the same invocation ids and turns (the executors' idempotency keys).
        """
        thread_id = str(config["configurable"]["thread_id"])
        writes = [w for w in writes if w[0] in WRITES_IDX_MAP]
        if not writes:
            _faults.boundary("put_writes", "before")
            _faults.boundary("put_writes", "after")
            return
        verb = "INSERT OR REPLACE"
        with self.cursor() as cur:
            self._fence(cur, thread_id)
            cur.executemany(
                f"{verb} INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
                "task_path, idx, channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        thread_id,
                        str(config["configurable"]["checkpoint_ns"]),
                        str(config["configurable"]["checkpoint_id"]),
                        task_id,
                        task_path,
                        WRITES_IDX_MAP.get(channel, idx),
                        channel,
                        *self.serde.dumps_typed(value),
                    )
                    for idx, (channel, value) in enumerate(writes)
                ],
            )
            _faults.boundary("put_writes", "before")
        _faults.boundary("put_writes", "after")

    def _fence(self, cur: Any, delivery: str) -> None:
        check_token(cur, delivery, self.tokens.get(delivery))
