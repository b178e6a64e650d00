"""Waking runners: ``NOTIFY`` when a delivery is queued, ``LISTEN`` on a dedicated connection.

Every transaction that makes a delivery ``queued`` also notifies the channel
(:data:`QUEUE_CHANNEL`, the delivery id as payload); PostgreSQL delivers it at
commit, so a runner never wakes for work it cannot see yet. A runner listens on
one connection of its own, outside the pool (``LISTEN`` is session state, which
pooled connections never keep). The listener only wakes the runner: the claim
is the same as when the runner polls, and polling stays as the fallback.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import psycopg

from host.storage.postgres._connect import CONNECT_TIMEOUT_S, conninfo

QUEUE_CHANNEL = "execsys_queue"
"""The channel a queuing transaction notifies."""
NOTIFY_SQL = "SELECT pg_notify('execsys_queue', %s)"
"""Run in the transaction that queues a delivery (payload: its id)."""
RETRY_S = (0.25, 5.0)
"""The first and the longest wait before a lost listening connection is opened again."""


class QueueListener:
    """A connection listening on :data:`QUEUE_CHANNEL`; each notification calls ``wake``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.listening = asyncio.Event()
        """Set while the connection listens (cleared when it is lost)."""
        self.wakeups = 0
        """Notifications received so far."""

    async def start(self, wake: Callable[[], None], wait_s: float) -> asyncio.Task[None]:
        """Listen in a task; wait up to ``wait_s`` for it to listen (else polling covers)."""
        task = asyncio.ensure_future(self.run(wake))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.listening.wait(), wait_s)
        return task

    async def run(self, wake: Callable[[], None]) -> None:
        """Listen until cancelled, reconnecting with a doubling wait when the connection is lost.

        ``wake`` is called for every notification and after every (re)connection,
        since a delivery queued while nobody listened sent its notification to
        no one.
        """
        failures = 0
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    conninfo(self.url), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
                )
                async with conn:
                    await conn.execute(f"LISTEN {QUEUE_CHANNEL}")
                    failures = 0
                    self.listening.set()
                    wake()
                    async for _note in conn.notifies():
                        self.wakeups += 1
                        wake()
            except psycopg.Error:
                pass
            self.listening.clear()
            failures += 1
            first, longest = RETRY_S
            await asyncio.sleep(min(longest, first * 2 ** (failures - 1)))
