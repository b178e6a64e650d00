"""Threads that are known to hold no checkpoint: their first read needs no query.

A delivery admitted by the operation that now runs it has an empty thread: its
row was stored a moment ago, under its lease, and nothing writes a checkpoint
before the first run. LangGraph still asks the checkpointer for the thread's
latest checkpoint when the run starts. The Host's savers answer that one read
from memory for such a thread (decision 0145).
"""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple


class FreshThreads(BaseCheckpointSaver[str]):
    """Mixin: answer the first latest-checkpoint read of a thread marked fresh with None."""

    fresh: set[str]
    """Threads of deliveries admitted by the run now starting (no checkpoint yet); each
    saver sets it to an empty set of its own when it is created."""

    def _fresh_read(self, config: RunnableConfig) -> bool:
        """Whether ``config`` asks for the latest root checkpoint of a fresh thread (once)."""
        configurable = config.get("configurable") or {}
        thread = str(configurable.get("thread_id"))
        if thread not in self.fresh:
            return False
        if configurable.get("checkpoint_id") or configurable.get("checkpoint_ns"):
            return False
        self.fresh.discard(thread)
        return True

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """None for a fresh thread's first read; otherwise the saver's own answer."""
        if self._fresh_read(config):
            return None
        return await super().aget_tuple(config)
