"""Live progress on a terminal: each node transition as the Host journals it.

The lines come from the delivery's journal (the Host's public ``journal_lines``),
read between the steps of the operation being watched; they are written only
when stdout is a terminal and ``--json`` is not given.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from contracts import ExecsysError
from execution_system.cli._signals import interruptible

T = TypeVar("T")


def wanted(as_json: bool) -> bool:
    """Whether to show progress: on a terminal, and never with ``--json``."""
    return not as_json and sys.stdout.isatty()


def _lines(host: Any, delivery: str) -> list[bytes]:
    try:
        return list(host.journal_lines(delivery))
    except ExecsysError:  # not admitted yet
        return []


def describe(event: dict[str, Any], elapsed: float) -> str:
    """One progress line: elapsed time, node, activation, transition, attempt, error."""
    attempt = (event.get("attempt") or {}).get("sequence")
    tail = f" (attempt {attempt})" if attempt else ""
    if event.get("error"):
        tail += f" [{event['error']}]"
    return (
        f"  {elapsed:7.2f}s  {event.get('node', '?')}#{event.get('activation', '?')}  "
        f"{event.get('transition', '?')}{tail}"
    )


async def follow(host: Any, delivery: str, operation: Awaitable[T], *, enabled: bool) -> T:
    """Await ``operation``, printing the delivery's new journal events while it runs.

    SIGINT and SIGTERM stop what it drives at a safe boundary (``_signals``).
    """
    if not enabled:
        return await interruptible(host, operation)
    seen = max(1, len(_lines(host, delivery)))
    started = time.monotonic()
    task = asyncio.ensure_future(interruptible(host, operation))

    def show() -> None:
        nonlocal seen
        lines = _lines(host, delivery)
        for line in lines[seen:]:
            sys.stdout.write(describe(json.loads(line), time.monotonic() - started) + "\n")
        sys.stdout.flush()
        seen = max(seen, len(lines))

    while not task.done():
        await asyncio.wait({task}, timeout=0.2)
        show()
    return task.result()
