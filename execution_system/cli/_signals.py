"""SIGINT and SIGTERM during a command that drives deliveries in its own process.

Without this, SIGTERM ended the process at once and SIGINT raised
``KeyboardInterrupt`` wherever the process was: a delivery in the middle of a
step was left ``running`` for ``status`` to report as orphaned, with whatever
the executor had half-written still in its workspace until a directive
restored it.

Now the first signal asks the Host to stop what it drives, as an operator's
``stop`` would (:meth:`host.HostCore.stop_all`): the executors' turns in flight
end, each workspace is restored to its turn's base savepoint, the node is
halted (journaled, with the signal's name) and the delivery rests ``stopped``
until ``recover --directive continue``. The command then prints what it
would have printed and exits with 128 + the signal's number. A second signal,
or a first one while nothing is being driven (admission, say), cancels the
command at once, as before (exit 130).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

RECEIVED: list[int] = []
"""The signals this process received while a command drove deliveries (the first decides)."""


def exit_status() -> int | None:
    """128 + the first signal received while driving, if any (the shell's convention)."""
    return 128 + RECEIVED[0] if RECEIVED else None


def describe() -> str:
    """The line that says why the command's exit status is not its own."""
    name = signal.Signals(RECEIVED[0]).name
    return (
        f"interrupted ({name}): what this command drove is stopped at a safe boundary; "
        "'execsys recover DELIVERY --directive continue' goes on from there"
    )


async def interruptible(host: Any, operation: Awaitable[T]) -> T:
    """Await ``operation``; the first SIGINT or SIGTERM stops the deliveries it drives."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(operation)
    cancelled = False

    def on_signal(signum: int) -> None:
        nonlocal cancelled
        first = not RECEIVED
        RECEIVED.append(signum)
        reason = f"its process received {signal.Signals(signum).name}"
        if first and host.stop_all(reason):
            return  # the drive ends at its next safe boundary
        cancelled = True
        task.cancel()

    installed = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is signal.SIG_IGN:
            continue  # e.g. SIGINT of a background job: whoever ignored it meant it
        try:
            loop.add_signal_handler(signum, on_signal, signum)
        except (NotImplementedError, RuntimeError, ValueError):
            continue  # not the main thread, or no signals on this platform
        installed.append(signum)
    try:
        return await task
    except asyncio.CancelledError:
        if cancelled:
            raise KeyboardInterrupt from None
        raise
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
