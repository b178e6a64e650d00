"""Delivery status changes as a stream: the source of ``GET /events`` and ``execsys watch``.

The feed polls the Host's public listing for rows changed since shortly before
the newest change it has seen, and compares each delivery's (status, outcome,
last change) with what it saw last; a mutating API call pokes it
so that its own changes go out at once. Polling the public API keeps the web
layer off the Host's tables, and works for changes made by other processes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
from datetime import UTC, datetime
from typing import Any

Listing = Callable[[float | None], list[dict[str, Any]]]
"""Rows changed at or after an instant (all rows for None), each with ``changed`` if known."""

#: Re-read this far behind the newest change seen, so that a commit stamped just before
#: an earlier poll's read, but visible only after it, is not missed.
OVERLAP_S = 2.0


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row.get("status"), row.get("outcome"), row.get("changed", row.get("updated")))


class ChangeFeed:
    """Fan-out of status changes to any number of subscribers."""

    def __init__(self, listing: Listing, *, interval_s: float = 0.25) -> None:
        self._listing = listing
        self._interval_s = interval_s
        self._seen: dict[str, tuple[Any, ...]] | None = None
        self._mark: float | None = None
        self._queues: set[asyncio.Queue[dict[str, Any]]] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def subscribers(self) -> int:
        """How many streams are open."""
        return len(self._queues)

    def poke(self) -> None:
        """Poll now (after a change this process made)."""
        self._wake.set()

    def poll(self) -> list[dict[str, Any]]:
        """Compare recent rows with what was seen; return the changes (none the first time)."""
        since = None if self._seen is None or self._mark is None else self._mark - OVERLAP_S
        rows = self._listing(since)
        marks = [row["changed"] for row in rows if isinstance(row.get("changed"), int | float)]
        if marks:
            self._mark = max([*marks, self._mark or 0.0])
        if self._seen is None:
            self._seen = {row["delivery"]: _key(row) for row in rows}
            return []
        now = datetime.now(UTC).isoformat(timespec="milliseconds")
        changes = []
        for row in rows:
            previous = self._seen.get(row["delivery"])
            if previous == _key(row):
                continue
            self._seen[row["delivery"]] = _key(row)
            changes.append(
                {
                    "delivery": row["delivery"],
                    "graph": row.get("graph"),
                    "status": row["status"],
                    "outcome": row.get("outcome"),
                    "updated": row.get("updated"),
                    "previous": previous[0] if previous else None,
                    "seen": now,
                }
            )
        return changes

    async def _run(self) -> None:
        while self._queues:
            for change in self.poll():
                for queue in list(self._queues):
                    queue.put_nowait(change)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._interval_s)
        self._task = None

    async def subscribe(self) -> AsyncGenerator[dict[str, Any], None]:
        """Yield every change from now on, until the consumer stops iterating."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        if self._task is None:
            # The baseline: changes are relative to the moment of subscribing. After the
            # first, it is a catch-up on what changed while nobody listened (a page reload
            # costs a short listing, not the whole store's), its changes not sent.
            self.poll()
        self._queues.add(queue)
        if self._task is None:
            self._task = asyncio.create_task(self._run())
        try:
            while True:
                yield await queue.get()
        finally:
            self._queues.discard(queue)

    async def close(self) -> None:
        """Stop polling."""
        self._queues.clear()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
