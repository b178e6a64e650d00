"""The PostgreSQL saver's commits run off the event loop, and a cancellation waits for them.

A lost lease cancels the run of its delivery; the cleanup after that
cancellation (forgetting the cached journal) must come after a commit in
flight, never while its worker thread still appends to that journal.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any

import pytest
from langgraph.checkpoint.base import WRITES_IDX_MAP

from host.langgraph._pg_saver import PgHostSaver, off_loop


def test_the_loop_runs_other_work_while_the_call_blocks() -> None:
    release = threading.Event()

    async def scenario() -> list[str]:
        seen: list[str] = []

        def blocking() -> str:
            release.wait(30)
            seen.append("call")
            return "done"

        async def other() -> None:
            seen.append("other")
            release.set()

        got, _ = await asyncio.gather(off_loop(blocking), other())
        assert got == "done"
        return seen

    # Run on the loop's thread, ``other`` could only start after the call ended.
    assert asyncio.run(scenario()) == ["other", "call"]


def test_a_cancelled_caller_returns_only_after_the_call_ended() -> None:
    started, release = threading.Event(), threading.Event()
    finished: list[int] = []

    def blocking() -> int:
        started.set()
        release.wait(30)
        finished.append(1)
        return 1

    async def scenario() -> None:
        task = asyncio.ensure_future(off_loop(blocking))
        await asyncio.to_thread(started.wait, 30)
        task.cancel()
        for _ in range(20):  # give the cancellation every chance to finish early
            await asyncio.sleep(0)
        assert not task.done()
        task.cancel()  # a second cancellation does not end the wait either
        for _ in range(20):
            await asyncio.sleep(0)
        assert not task.done()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert finished == [1]

    asyncio.run(scenario())


def test_the_call_s_error_reaches_the_caller() -> None:
    def failing() -> None:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        asyncio.run(off_loop(failing))


def test_a_call_that_fails_after_its_caller_was_cancelled_is_not_reported_as_lost() -> None:
    """The failure is taken by off_loop; asyncio must not print it as never retrieved."""

    release = threading.Event()
    reported: list[dict[str, object]] = []

    def failing() -> None:
        release.wait(10)
        raise ConnectionError("server gone")

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: reported.append(ctx))
        task = asyncio.create_task(off_loop(failing))
        await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.sleep(0.05)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        gc.collect()
        await asyncio.sleep(0)

    asyncio.run(scenario())
    gc.collect()
    assert reported == []


def _saver(tokens: dict[str, int]) -> tuple[PgHostSaver, list[bool]]:
    """A PostgreSQL saver whose store calls only note whether they ran on the loop's thread."""
    saver = PgHostSaver.__new__(PgHostSaver)  # no pool: the calls below are replaced
    saver.tokens = tokens
    on_loop: list[bool] = []

    def noted(*_args: object) -> dict[str, object]:
        on_loop.append(threading.current_thread() is threading.main_thread())
        return {}

    def noted_writes(*_args: object) -> None:
        noted()

    saver.put = noted  # type: ignore[method-assign,assignment]
    saver.put_writes = noted_writes  # type: ignore[method-assign,assignment]
    return saver, on_loop


def test_the_only_running_delivery_commits_on_the_loop_and_two_overlap() -> None:
    config: Any = {"configurable": {"thread_id": "a"}}
    alone, on_loop = _saver({"a": 1})
    asyncio.run(alone.aput(config, {}, {}, {}))  # type: ignore[typeddict-item]
    assert on_loop == [True]
    two, on_loop = _saver({"a": 1, "b": 2})
    asyncio.run(two.aput(config, {}, {}, {}))  # type: ignore[typeddict-item]
    assert on_loop == [False], "with another delivery in flight the commit leaves the loop"


def test_writes_with_nothing_to_store_stay_on_the_loop() -> None:
    config: Any = {"configurable": {"thread_id": "a"}}
    saver, on_loop = _saver({"a": 1, "b": 2})
    asyncio.run(saver.aput_writes(config, [("value", 1)], "task"))
    asyncio.run(saver.aput_writes(config, [(next(iter(WRITES_IDX_MAP)), ValueError("x"))], "task"))
    assert on_loop == [True, False]
