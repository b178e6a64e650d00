"""``execsys serve``: a long-running runner that drives queued deliveries.

The runner looks for ``queued`` deliveries, claims up to ``--concurrency`` of
them at a time and drives each to its next stop under its lease (renewed by the
lease manager every TTL/3). On PostgreSQL it ``LISTEN``s on a connection of its
own and looks as soon as a delivery is queued; it also looks every
``--poll-interval`` seconds (the only way on SQLite, and the fallback while the
listening connection is lost). SIGTERM or SIGINT stops the claiming; the
turns in flight finish and commit, and each delivery in hand goes back to the
queue at its next step boundary (a ``continue`` for the next runner), its lease
released; then the process exits 0. Turns still running when ``--drain-grace``
seconds have passed (or at a second signal) are ended, their workspaces
restored, and their nodes handed back the same way (decision 0134).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import signal
import sys
import time
from typing import Any

from contracts import ErrorCode, ExecsysError, error
from execution_system.cli._output import emit, terminal_safe

POLL_S = 0.25
"""How long an idle runner waits before looking for queued work again (default)."""
BEAT_S = 2.0
"""How often a runner records its heartbeat."""
BACKOFF_S = (0.25, 5.0)
"""The first and the longest wait before a runner that lost its store tries it again."""
LISTEN_WAIT_S = 5.0
"""How long a starting runner waits for its listening connection before it relies on polling."""
DRAIN_GRACE_S = 20.0
"""How long turns in flight may run on after a shutdown signal before they are ended (default).

Under an orchestrator's usual 30 s between SIGTERM and SIGKILL, with room left
for the ended turns' restores and commits.
"""


class Server:
    """One runner's claim loop over a Host."""

    def __init__(
        self,
        host: Any,
        *,
        concurrency: int,
        name: str,
        as_json: bool,
        poll_s: float = POLL_S,
        grace_s: float = DRAIN_GRACE_S,
    ) -> None:
        self.host = host
        self.concurrency = concurrency
        self.name = name
        self.as_json = as_json
        self.poll_s = poll_s
        self.grace_s = grace_s
        self.grace: asyncio.TimerHandle | None = None
        """The pending end of the drain's grace (set by the first signal)."""
        self.stopping = asyncio.Event()
        self.nudge = asyncio.Event()
        """Set to end the loop's wait early: a signal, a notification, a delivery done."""
        self.woken = asyncio.Event()
        """Set when there may be queued work to claim now (a notification, room freed)."""
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.failures = 0
        """Store failures in a row of the claim loop (0: the store answers)."""

    def stop(self) -> None:
        """The signal handler: stop claiming; hand what is in hand back at its next boundary.

        The first signal starts the drain and its grace; a second one ends the
        grace at once.
        """
        if self.stopping.is_set():
            self.interrupt("a second signal")
            return
        self.host.drain()
        self.stopping.set()
        self.nudge.set()
        self.grace = asyncio.get_running_loop().call_later(
            self.grace_s, self.interrupt, f"the {self.grace_s:g} s drain grace ran out"
        )

    def interrupt(self, why: str) -> None:
        """End the turns still in flight: their nodes are handed back as well."""
        if self.grace is not None:
            self.grace.cancel()
        reached = self.host.drain(interrupt=True)
        if reached:
            sys.stderr.write(
                f"execsys: serve {terminal_safe(self.name)}: {why}; ending the turns "
                f"of {reached} deliver{'y' if reached == 1 else 'ies'} in flight\n"
            )
            sys.stderr.flush()

    def wake(self) -> None:
        """Look for queued work now rather than at the next poll."""
        self.woken.set()
        self.nudge.set()

    async def main(self) -> int:
        """Claim and drive until a signal; then finish what is in hand and return 0."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        listening = await self.listen()
        try:
            await self.serve()
        finally:
            if listening is not None:
                listening.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await listening
        return 0

    async def listen(self) -> asyncio.Task[None] | None:
        """Start the store's queue listener, if it has one (PostgreSQL's LISTEN)."""
        make = getattr(self.host.store, "queue_listener", None)
        if make is None:
            return None
        task: asyncio.Task[None] = await make().start(self.wake, LISTEN_WAIT_S)
        return task

    async def serve(self) -> None:
        """The claim loop, then the drain."""
        started = time.time()
        self.host.runner_heartbeat(self.name, started)
        beat = time.monotonic()
        next_look = 0.0
        while not self.stopping.is_set():
            if self.woken.is_set() or time.monotonic() >= next_look:
                self.woken.clear()
                next_look = time.monotonic() + await self.claim_or_back_off()
            self.nudge.clear()
            if self.woken.is_set() or self.stopping.is_set():
                continue
            pause = max(0.0, min(next_look, beat + BEAT_S) - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.nudge.wait(), pause)
            if self.failures == 0 and time.monotonic() - beat >= BEAT_S:
                self.beat(started)
                beat = time.monotonic()
        while self.tasks:
            await asyncio.wait(list(self.tasks.values()), timeout=BEAT_S)
            self.beat(started)
        if self.grace is not None:
            self.grace.cancel()
        try:
            self.host.runner_gone(self.name)
        except Exception as exc:  # the row ages out of the listing on its own
            self.failed(exc if isinstance(exc, ExecsysError) else _mapped(exc))

    def beat(self, started: float) -> None:
        """Record the heartbeat; a store failure is reported and the runner goes on."""
        try:
            self.host.runner_heartbeat(self.name, started)
        except ExecsysError as exc:
            self.failed(exc)
        except Exception as exc:
            self.failed(_mapped(exc))

    async def claim_or_back_off(self) -> float:
        """Claim what there is room for; how long to wait before the next look.

        A store that fails (a server restarting, a network cut) is reported once
        per outage on stderr and tried again after a wait that doubles up to
        ``BACKOFF_S[1]``; the runner neither exits nor stops its deliveries in
        hand (their own writes fail or succeed on their own).
        """
        try:
            await self.claim()
        except Exception as exc:
            if self.failures == 0:
                self.failed(exc if isinstance(exc, ExecsysError) else _mapped(exc))
            self.failures += 1
            first, longest = BACKOFF_S
            return float(min(longest, first * 2 ** (self.failures - 1)))
        self.failures = 0
        return self.poll_s

    async def claim(self) -> None:
        """Start driving queued deliveries while this runner has room."""
        room = self.concurrency - len(self.tasks)
        if room <= 0:
            return
        listed = await asyncio.to_thread(self.host.queued_deliveries, room + len(self.tasks))
        for delivery in listed:
            if delivery in self.tasks or len(self.tasks) >= self.concurrency:
                continue
            task = asyncio.ensure_future(self.drive(delivery))
            self.tasks[delivery] = task
            task.add_done_callback(functools.partial(self.done, delivery))

    def done(self, delivery: str, _task: asyncio.Task[None]) -> None:
        """Forget a delivery this runner no longer drives; its room may take more work."""
        self.tasks.pop(delivery, None)
        self.wake()

    async def drive(self, delivery: str) -> None:
        """Drive one delivery; report its stop on stdout, a failure as one line on stderr."""
        try:
            report = await self.host.drive_queued(delivery)
        except ExecsysError as exc:
            self.failed(exc)
            return
        except Exception as exc:  # a store failure must not end the runner
            self.failed(_mapped(exc))
            return
        if report is None:
            return  # another runner claimed it first
        if self.as_json:
            emit(json.dumps({"runner": self.name, **report.public()}, sort_keys=True))
        else:
            emit(f"{self.name}: delivery {report.delivery}: {report.status.value}")

    def failed(self, exc: ExecsysError) -> None:
        """Say on stderr why a delivery was not driven (the runner goes on)."""
        sys.stderr.write(f"execsys: {terminal_safe(exc.one_line())}\n")
        sys.stderr.flush()


def _mapped(exc: Exception) -> ExecsysError:
    from host import store_failure

    mapped = store_failure(exc, "")
    if mapped is not None:
        return mapped
    return error(
        ErrorCode.STORE_ERROR,
        f"{type(exc).__name__}: {exc}".splitlines()[0][:300],
        expected="a store the runner can read and write",
    )
