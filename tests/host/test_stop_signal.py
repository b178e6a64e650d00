"""The delivery's stop signal: one future per delivery that every in-flight turn races."""

from __future__ import annotations

import asyncio

from host._context import StopSignal


def test_the_future_is_shared_and_done_once_the_stop_is_set() -> None:
    async def scenario() -> None:
        stop = StopSignal()
        future = stop.future()
        assert stop.future() is future
        assert not future.done()
        stop.set()
        assert future.done()
        assert stop.is_set()
        await asyncio.wait_for(stop.wait(), 1)  # the event itself still works

    asyncio.run(scenario())


def test_a_future_asked_for_after_the_stop_is_already_done() -> None:
    async def scenario() -> None:
        stop = StopSignal()
        stop.set()
        assert stop.future().done()

    asyncio.run(scenario())


def test_a_cleared_stop_gives_a_fresh_future() -> None:
    async def scenario() -> None:
        stop = StopSignal()
        stop.set()
        stop.clear()
        assert not stop.future().done()

    asyncio.run(scenario())


def test_a_turn_racing_the_stop_ends_when_the_stop_is_set() -> None:
    async def scenario() -> None:
        stop = StopSignal()
        turns = [asyncio.ensure_future(asyncio.sleep(30)) for _ in range(3)]
        races = [
            asyncio.ensure_future(
                asyncio.wait({turn, stop.future()}, return_when=asyncio.FIRST_COMPLETED)
            )
            for turn in turns
        ]
        await asyncio.sleep(0)
        stop.set()
        for race in races:
            done, _ = await asyncio.wait_for(race, 1)
            assert stop.future() in done
        for turn in turns:
            turn.cancel()

    asyncio.run(scenario())
