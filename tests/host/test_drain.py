"""A draining Host: turns in flight finish, nothing new starts, 'continue' picks it up."""

from __future__ import annotations

import asyncio
from typing import Any

from contracts import InvocationRequest
from tests.host.harness import graph_doc, make_delivery, reply


def _fan() -> Any:
    """Two branches: 'quick' (then 'more') beside 'slow'; a barrier, 'last', a terminal."""
    return graph_doc(
        {
            "fan": {"kind": "parallel", "branches": ["quick", "slow"], "barrier": "join"},
            "quick": {"kind": "action", "executor": "quick", "outputs": {}, "next": "more"},
            "more": {"kind": "action", "executor": "last", "outputs": {}, "next": "join"},
            "slow": {"kind": "action", "executor": "slow", "outputs": {}, "next": "join"},
            "join": {"kind": "barrier", "next": "last"},
            "last": {"kind": "action", "executor": "last", "outputs": {}, "next": "done"},
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        "fan",
    )


def test_a_drain_lets_turns_in_flight_commit_and_starts_nothing_new(harness: Any) -> None:
    doc = _fan()
    box: dict[str, Any] = {}

    async def quick(req: InvocationRequest) -> Any:
        box["host"].drain()  # the runner is told to shut down while 'slow' runs
        return reply({})

    async def slow(req: InvocationRequest) -> Any:
        await asyncio.sleep(0.2)  # in flight when the drain begins
        return reply({})

    async def last(req: InvocationRequest) -> Any:
        return reply({})

    h = harness({"quick": quick, "slow": slow, "last": last})
    box["host"] = h.host
    delivery = make_delivery(doc)
    report = h.run(delivery)
    assert report.status.value == "stopped"
    assert sorted(c.node for c in h.invoker.calls) == ["quick", "slow"], "nothing new started"
    events = h.events(delivery)
    done = {e["node"] for e in events if e["transition"] == "work-completed"}
    assert {"quick", "slow"} <= done, "the sibling in flight was not interrupted"
    (blocked,) = [e for e in events if e["transition"] == "work-blocked"]
    assert blocked["node"] == "more" and "handed back" in blocked["error"]["message"]
    assert delivery.delivery_id in h.host.handed_back

    h.host.draining = False  # the next runner
    report = asyncio.run(
        h.host.recover(delivery.delivery_id, "continue", actor="runner b", reason="handed back")
    )
    assert report.status.value == "completed"
    assert sorted(c.node for c in h.invoker.calls) == ["last", "more", "quick", "slow"]
    assert delivery.delivery_id not in h.host.handed_back


def test_a_drain_whose_grace_ran_out_ends_the_turns_in_flight_and_hands_them_back(
    harness: Any,
) -> None:
    doc = _fan()
    box: dict[str, Any] = {"ended": 0, "hang": True}

    async def quick(req: InvocationRequest) -> Any:
        # The runner is told to shut down, and its grace runs out while 'slow' runs.
        host = box["host"]
        host.drain()
        asyncio.get_running_loop().call_later(0.05, lambda: host.drain(interrupt=True))
        return reply({})

    async def slow(req: InvocationRequest) -> Any:
        if box["hang"]:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                box["ended"] += 1
                raise
        return reply({})

    async def last(req: InvocationRequest) -> Any:
        return reply({})

    h = harness({"quick": quick, "slow": slow, "last": last})
    box["host"] = h.host
    delivery = make_delivery(doc)
    report = h.run(delivery)
    assert report.status.value == "stopped"
    assert box["ended"] == 1, "the turn in flight was ended"
    assert sorted(c.node for c in h.invoker.calls) == ["quick", "slow"], "nothing new started"
    events = h.events(delivery)
    assert [e["node"] for e in events if e["transition"] == "work-completed"] == ["fan", "quick"]
    (blocked,) = [e for e in events if e["transition"] == "work-blocked"]
    assert blocked["node"] == "slow"
    assert blocked["error"]["message"].startswith("handed back during 'slow'")
    assert delivery.delivery_id in h.host.handed_back

    h.host.draining = h.host.interrupting = False  # the next runner
    box["hang"] = False
    report = asyncio.run(
        h.host.recover(delivery.delivery_id, "continue", actor="runner b", reason="handed back")
    )
    assert report.status.value == "completed"
    slow_calls = [c for c in h.invoker.calls if c.node == "slow"]
    assert len(slow_calls) == 2
    assert len({(c.invocation, c.attempt, c.turn) for c in slow_calls}) == 1, "the same turn again"
    assert sorted(c.node for c in h.invoker.calls) == ["last", "more", "quick", "slow", "slow"]
