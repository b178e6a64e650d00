"""A delivery admitted by its own run reads no checkpoint and no stop request before it commits."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from host.langgraph._fresh import FreshThreads
from tests.host.harness import Harness, graph_doc, make_delivery, reply


class _Saver(FreshThreads, InMemorySaver):
    def __init__(self) -> None:
        super().__init__()
        self.fresh = set()


def _config(thread: str, **more: str) -> Any:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": "", **more}}


def test_only_the_first_latest_read_of_a_fresh_thread_is_answered_from_memory() -> None:
    async def scenario() -> None:
        saver = _Saver()
        saver.fresh.add("t")
        assert await saver.aget_tuple(_config("t", checkpoint_id="c")) is None
        assert "t" in saver.fresh, "a read of a given checkpoint is not the first latest read"
        saver.get_tuple = lambda config: "stored"  # type: ignore[assignment,return-value]
        saver.aget_tuple = FreshThreads.aget_tuple.__get__(saver)  # type: ignore[method-assign]
        assert await saver.aget_tuple(_config("t")) is None
        assert "t" not in saver.fresh
        assert await saver.aget_tuple(_config("t")) == "stored", "only the first read is skipped"
        assert await saver.aget_tuple(_config("other")) == "stored"

    asyncio.run(scenario())


def test_a_new_delivery_reads_no_checkpoint_before_it_commits_and_later_runs_do(
    tmp_path: Path,
) -> None:
    doc = graph_doc(
        {
            "work": {"kind": "action", "executor": "work", "outputs": {}, "next": "done"},
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        "work",
    )

    async def work(request: Any) -> dict[str, Any]:
        return reply({})

    harness = Harness(tmp_path, {"work": work})
    saver: Any = harness.host.substrate.saver
    calls: list[str] = []
    get_tuple, put = saver.get_tuple, saver.put
    saver.get_tuple = lambda config: calls.append("read") or get_tuple(config)
    saver.put = lambda *args: calls.append("put") or put(*args)
    store: Any = harness.host.store
    stop_request = store.stop_request
    store.stop_request = lambda delivery: calls.append("stop?") or stop_request(delivery)
    try:
        delivery = make_delivery(doc)
        report = harness.run(delivery)
        assert report.status == "completed"
        assert calls[0] == "put", calls
        assert "stop?" not in calls, "a run shorter than one poll interval polls no stop"
        assert not saver.fresh, "nothing stays marked once the run ends"
        calls.clear()
        assert asyncio.run(harness.host.values(delivery))["run"]["status"] == "completed"
        assert calls == ["read"], "any later read goes to the store"
    finally:
        harness.close()
