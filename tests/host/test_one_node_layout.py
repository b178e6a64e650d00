"""A graph without parallel nodes runs as one LangGraph node (decision 0158).

What the layout must give: LangGraph's own state stays the same size along a
chain (so its per-step walks do not grow), graphs with parallel nodes keep a
LangGraph node per control node, and a thread written under the old layout is
answered under the new one.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from contracts import ErrorCode, ExecsysError
from host.journal import verify_lines
from host.langgraph._compile import SOLE_NODE, sole_scheduled
from tests.host.harness import graph_doc, make_delivery
from tests.host.test_checkpoint_deltas import _chain, _ok, asking_chain, recorded


def _fan() -> dict[str, Any]:
    work = {"kind": "action", "executor": "step", "outputs": {"ok": {"type": "boolean"}}}
    return graph_doc(
        {
            "fan": {"kind": "parallel", "branches": ["a", "b"], "barrier": "join"},
            "a": {**work, "next": "join"},
            "b": {**work, "next": "join"},
            "join": {"kind": "barrier", "next": "end"},
            "end": {"kind": "terminal", "outcome": "succeeded"},
        },
        "fan",
    )


def test_only_a_graph_with_a_parallel_node_gets_a_langgraph_node_per_control_node(harness):
    h = harness({"step": _ok})
    chain = make_delivery(_chain(30))
    graph, _ = h.host.substrate.graphs.get(chain.graph)
    assert set(graph.nodes) == {"__start__", SOLE_NODE}
    fan = make_delivery(_fan())
    graph, _ = h.host.substrate.graphs.get(fan.graph)
    assert set(graph.nodes) == {"__start__", *fan.graph.nodes}
    for delivery in (chain, fan):
        assert h.run(delivery).status.value == "completed"
        assert verify_lines(h.host.journal_lines(delivery.delivery_id)).ok


def test_langgraph_s_own_maps_do_not_grow_along_a_chain(harness):
    # The last checkpoint LangGraph hands the saver, at the end of a short and of a
    # long chain: its version maps are the same size (per node, they would be 4x).
    h = harness({"step": _ok})
    written = recorded(h.host.substrate.saver.codec)
    sizes = []
    for length in (40, 160):
        written.clear()
        delivery = make_delivery(_chain(length), nonce=str(length))
        assert h.run(delivery).status.value == "completed"
        last = list(written.values())[-1]
        sizes.append((len(last["versions_seen"]), len(last["channel_versions"])))
    assert sizes[0] == sizes[1], sizes


@pytest.mark.parametrize("written_one_node", [False, True], ids=["old-to-new", "new-to-old"])
def test_a_thread_written_under_one_layout_is_answered_under_the_other(harness, written_one_node):
    # A store upgraded in place (old to new), or a fleet whose runners are upgraded one
    # at a time, where an older runner picks up a newer runner's thread (new to old).
    doc, ask_once = asking_chain()
    first = harness({"step": _ok, "ask": ask_once})
    first.host.substrate.graphs.one_node = written_one_node
    delivery = make_delivery(doc)
    assert first.run(delivery).status.value == "suspended"
    compiled, _ = first.host.substrate.graphs.get(delivery.graph)
    assert ("s015" in compiled.nodes) is not written_one_node
    first.close()
    second = harness({"step": _ok, "ask": ask_once}, custody=first.custody)
    second.host.substrate.graphs.one_node = not written_one_node
    report = second.host.status(delivery.delivery_id)
    assert report.suspension is not None
    done = asyncio.run(
        second.host.answer(delivery.delivery_id, report.suspension.correlation, {"go": True})
    )
    assert done.status.value == "completed"
    events = second.events(delivery)
    assert [e["node"] for e in events if e["transition"] == "work-completed"] == [
        *(f"s{i:03d}" for i in range(30)),
        "end",
    ]
    assert verify_lines(second.host.journal_lines(delivery.delivery_id)).ok


def test_the_one_node_runs_the_woken_node_first_and_never_guesses():
    assert sole_scheduled({"wake": {"b": {}}, "scheduled": {"a": 1}}) == "b"
    assert sole_scheduled({"wake": {}, "scheduled": {"a": 1}}) == "a"
    assert sole_scheduled({}) is None
    with pytest.raises(ExecsysError) as caught:
        sole_scheduled({"scheduled": {"a": 1, "b": 1}})
    assert caught.value.code is ErrorCode.INTERNAL


def test_a_step_cut_short_is_reported_as_the_control_node_it_ran(harness):
    # The run is cancelled while 's005' runs: the last checkpoint has the one
    # LangGraph node pending, and the snapshot names the control node instead.
    entered = asyncio.Event()

    async def hang_at_five(request: Any) -> dict[str, Any]:
        if request.node == "s005":
            entered.set()
            await asyncio.sleep(3600)
        return await _ok(request)

    h = harness({"step": hang_at_five})
    delivery = make_delivery(_chain(10))

    async def cut_short() -> Any:
        run = asyncio.ensure_future(h.host.run(delivery))
        await asyncio.wait_for(entered.wait(), 30)
        run.cancel()
        with contextlib.suppress(BaseException):
            await run
        return await h.host.snapshot(delivery)

    snapshot = asyncio.run(cut_short())
    assert snapshot.tasks == ("s005",)
    assert SOLE_NODE not in snapshot.tasks
