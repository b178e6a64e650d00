"""The substrate port on LangGraph: compiled graphs, the checkpointer, thread reads and forks.

LangGraph is imported when the first substrate is created, never at import
time: reading commands never pay for it.
"""

from __future__ import annotations

import contextlib
from typing import Any

from contracts import AdmittedDelivery, ControlGraph, ExecsysError
from host._context import CompiledGraphInfo, DeliveryContext
from host._journal_book import JournalBook
from host._step_rows import StatusDeriver
from host._substrate import ThreadSnapshot
from host.storage import Storage
from host.storage.sqlite import SqliteStorage

RECURSION_LIMIT = 1_000_000
"""LangGraph's super-step bound; cycles are bounded by max_visits instead."""


class LangGraphSubstrate:
    """Delivery threads as LangGraph threads, checkpointed in the Host's store."""

    def __init__(self, store: Storage, journals: JournalBook, derive_status: StatusDeriver) -> None:
        from host.langgraph._compile import GraphCache

        self.saver: Any
        if isinstance(store, SqliteStorage):
            from host.langgraph._saver import HostSaver

            self.saver = HostSaver(store, journals, derive_status)
        else:
            from host.langgraph._pg_saver import PgHostSaver
            from host.storage.postgres import PostgresStorage

            assert isinstance(store, PostgresStorage), type(store)
            self.saver = PgHostSaver(store, journals, derive_status)
        self.saver.setup()
        self.graphs = GraphCache(self.saver)
        self.errors = store.errors

    def share_lease_counts(self, counts: dict[str, int]) -> None:
        """Count the checkpointer's fencing refusals in the lease manager's ``counts``."""
        self.saver.lease_counts = counts

    @property
    def compiles(self) -> int:
        """Graphs compiled so far."""
        return int(self.graphs.compiles)

    def info(self, graph: ControlGraph) -> CompiledGraphInfo:
        """The graph's facts (compiling it on first use)."""
        _, info = self.graphs.get(graph)
        return info

    def _config(
        self,
        delivery: AdmittedDelivery,
        ctx: DeliveryContext | None = None,
        checkpoint: str | None = None,
    ) -> dict[str, Any]:
        from host.langgraph._compile import CONTEXT_KEY

        configurable: dict[str, Any] = {"thread_id": delivery.delivery_id}
        if ctx is not None:
            configurable[CONTEXT_KEY] = ctx
        if checkpoint is not None:
            configurable["checkpoint_id"] = checkpoint
        return {"configurable": configurable, "recursion_limit": RECURSION_LIMIT}

    async def snapshot(
        self, delivery: AdmittedDelivery, checkpoint: str | None = None
    ) -> ThreadSnapshot:
        """The thread's state (latest, or at ``checkpoint``)."""
        from host.langgraph._compile import SOLE_NODE

        graph, _ = self.graphs.get(delivery.graph)
        snapshot = await graph.aget_state(self._config(delivery, checkpoint=checkpoint))
        values = dict(snapshot.values or {})
        # 'tasks', not 'next': a task whose writes were saved before the crash is
        # still pending although 'next' no longer lists it.
        tasks = {str(t.name) for t in snapshot.tasks}
        if SOLE_NODE in tasks:  # the one-node layout: the control node it was to run
            tasks.discard(SOLE_NODE)
            tasks |= set(values.get("wake") or {}) | set(values.get("scheduled") or {})
        return ThreadSnapshot(values=values, tasks=tuple(sorted(tasks)))

    async def values(self, delivery: AdmittedDelivery) -> dict[str, Any]:
        """The thread's latest channel values, read from its checkpoint alone.

        What :meth:`snapshot` gives as ``values``, without working out the
        step's tasks. A snapshot would also apply pending writes made outside
        any task; the Host's savers store no ordinary pending writes (only
        errors and interrupts, which set no channel), so there are none.
        """
        from langgraph._internal._typing import MISSING
        from langgraph.errors import EmptyChannelError

        graph, _ = self.graphs.get(delivery.graph)
        saved = await self.saver.aget_tuple(self._config(delivery))
        if saved is None:
            return {}
        stored = saved.checkpoint["channel_values"]
        values: dict[str, Any] = {}
        for key in graph.stream_channels_asis:
            if key in stored:
                values[key] = stored[key]
                continue
            # Never written: the channel's own empty value (a reducer's {}), if it has one.
            with contextlib.suppress(EmptyChannelError):
                values[key] = graph.channels[key].from_checkpoint(MISSING).get()
        return values

    async def run(
        self, delivery: AdmittedDelivery, first: dict[str, Any], token: int, ctx: DeliveryContext
    ) -> None:
        """Invoke the graph on the thread, every checkpoint fenced by ``token``."""
        graph, _ = self.graphs.get(delivery.graph)
        did = delivery.delivery_id
        self.saver.tokens[did] = token
        if ctx.fresh:
            self.saver.fresh.add(did)
        try:
            await graph.ainvoke(first, self._config(delivery, ctx), durability="sync")
        finally:
            self.saver.tokens.pop(did, None)
            self.saver.fresh.discard(did)

    async def update(
        self,
        delivery: AdmittedDelivery,
        update: dict[str, Any],
        token: int,
        checkpoint: str | None = None,
    ) -> None:
        """Write an ``update`` checkpoint (a fork from ``checkpoint``).

        It is written as the start node, or as the one node of a one-node graph.
        """
        from host.langgraph._compile import SOLE_NODE

        graph, _ = self.graphs.get(delivery.graph)
        did = delivery.delivery_id
        self.saver.tokens[did] = token
        as_node = SOLE_NODE if SOLE_NODE in graph.nodes else delivery.graph.start
        try:
            config = self._config(delivery, checkpoint=checkpoint)
            await graph.aupdate_state(config, update, as_node=as_node)
        finally:
            self.saver.tokens.pop(did, None)

    def error(self, exc: BaseException, delivery: str) -> ExecsysError:
        """Map an exception escaping LangGraph (or the store) to a catalogued error."""
        from host.langgraph._errors import substrate_error

        return substrate_error(exc, delivery)
