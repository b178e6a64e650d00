"""Checkpointers whose async methods call their synchronous ones.

The stock SqliteSaver has no async methods (they raise NotImplementedError).
Each operation of the Host's SQLite saver is one short transaction, serialized
on one connection, so the async twins call the sync methods directly instead
of hopping to a thread. The Host's SQLite saver and the benchmarks' raw
baseline both use ``SyncBackedSaver``, so the two are compared on exactly the
same delegation. (The PostgreSQL saver runs its commits in worker threads
instead, several deliveries' at once: ``host/langgraph/_pg_saver.py``.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.sqlite import SqliteSaver

_T = TypeVar("_T")


class SyncTwins(BaseCheckpointSaver[str]):
    """Async twins of a saver's synchronous methods (mix in before the saver).

    Each twin goes through :meth:`_twin`, which calls the method directly; a
    saver whose calls should leave the event loop's thread overrides it.
    """

    async def _twin(self, call: Callable[..., _T], *args: Any) -> _T:
        """Run one synchronous saver call for its async twin (here: directly)."""
        return call(*args)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async twin of get_tuple."""
        return await self._twin(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async twin of list (materialized first: list() holds the lock while yielding)."""

        def listed() -> list[CheckpointTuple]:
            return list(self.list(config, filter=filter, before=before, limit=limit))

        for item in await self._twin(listed):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async twin of put."""
        return await self._twin(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async twin of put_writes."""
        await self._twin(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async twin of delete_thread."""
        await self._twin(self.delete_thread, thread_id)


class SyncBackedSaver(SyncTwins, SqliteSaver):
    """The stock SqliteSaver plus async twins of its methods."""
