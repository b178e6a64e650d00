"""The checkpointer: LangGraph's SqliteSaver, plus everything that must commit with it.

``put`` writes, in ONE SQLite transaction: the checkpoint, a check of the
writer's fencing token, and the Host's rows of the step
(:func:`host._step_rows.write_step_rows`: records, journal events, derived
status). The statements themselves belong to the SQLite backend
(``host.storage.sqlite``). Either all of it is durable or none of it
is, which is what lets ``inspect`` promise that checkpoint and journal agree.

The stock saver commits even when its body raises and offers no async
methods; both are fixed here. Async methods call the synchronous ones directly:
each is one short transaction, and one connection serializes them anyway.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
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

from host import _faults
from host._journal_book import JournalBook
from host._lease import check_token
from host._step_rows import StatusDeriver, needs_flush, write_step_rows
from host.langgraph._async_saver import SyncBackedSaver
from host.langgraph._delta import DeltaCodec, DeltaSerde
from host.langgraph._fresh import FreshThreads
from host.storage import StorageTx
from host.storage.sqlite import SqliteStorage


class HostSaver(FreshThreads, SyncBackedSaver):
    """SqliteSaver that commits the Host's records, journal and status with each checkpoint."""

    def __init__(
        self,
        store: SqliteStorage,
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
        self.fresh = set()
        self.lease_counts: dict[str, int] | None = None
        """The lease manager's counts, which a fenced write of a checkpoint adds to."""
        self._local = threading.local()
        self.codec = DeltaCodec(self.serde, store.stored_checkpoint)
        self.serde = DeltaSerde(self.serde, self.codec)

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[Any]:
        """Like the stock cursor, but a failing body rolls back instead of committing."""
        self.setup()
        with self.store.saver_cursor(transaction) as cur:
            yield cur

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
        type_, blob, remembered = self.codec.encode(
            thread_id, checkpoint_ns, parent_id, checkpoint, new_versions
        )
        meta = json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False).encode(
            "utf-8", "ignore"
        )
        values: dict[str, Any] = dict(checkpoint.get("channel_values") or {})
        outbox = values.get("outbox") if "outbox" in new_versions else None
        # Work is still scheduled when a trigger channel holds an unconsumed value.
        more = metadata.get("source") == "input" or any(
            str(ch).startswith("branch:to:") for ch in values
        )
        flush = checkpoint_ns != "" or needs_flush(metadata.get("source"), outbox, more)
        with self.store.transaction(flush=flush) as tx:
            self._fence(tx, thread_id)
            tx.put_checkpoint(
                thread_id,
                checkpoint_ns,
                checkpoint["id"],
                parent_id,
                type_,
                blob,
                meta,
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
        self.codec.saw_writes(
            thread_id,
            str(config["configurable"].get("checkpoint_ns", "")),
            config["configurable"].get("checkpoint_id"),
            writes,
        )
        writes = [w for w in writes if w[0] in WRITES_IDX_MAP]
        if not writes:
            _faults.boundary("put_writes", "before")
            _faults.boundary("put_writes", "after")
            return
        with self.store.transaction() as tx:
            self._fence(tx, thread_id)
            tx.put_writes(
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

    def _fence(self, tx: StorageTx, delivery: str) -> None:
        check_token(tx, delivery, self.tokens.get(delivery), self.lease_counts)
