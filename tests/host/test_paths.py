"""Static topology, dynamic path: routes, subset selection, exact barriers, rounds."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import InvocationRequest, ParallelNode
from execution_system import parse_graph
from host import check_selection
from tests.host.harness import graph_doc, make_delivery, reply


def _fanout(select: bool, required: list[str] | None = None, loop: bool = False) -> dict[str, Any]:
    branches = ["a", "b", "c"]
    nodes: dict[str, Any] = {
        "plan": {
            "kind": "action",
            "executor": "plan",
            "outputs": {"pick": {"type": "array", "items": {"enum": branches}}},
            "next": "fan",
            "max_visits": 3,
        },
        "fan": {
            "kind": "parallel",
            "branches": branches,
            "barrier": "join",
            "required": required or [],
        },
        # Branch 'a' is three steps long, 'b' one, 'c' two: arrivals are uneven.
        "a": {
            "kind": "action",
            "executor": "work",
            "outputs": {"v": {"type": "integer"}},
            "next": "a2",
        },
        "a2": {
            "kind": "action",
            "executor": "work",
            "outputs": {"v": {"type": "integer"}},
            "next": "a3",
        },
        "a3": {
            "kind": "action",
            "executor": "work",
            "outputs": {"v": {"type": "integer"}},
            "next": "join",
        },
        "b": {
            "kind": "action",
            "executor": "work",
            "outputs": {"v": {"type": "integer"}},
            "next": "join",
        },
        "c": {
            "kind": "action",
            "executor": "work",
            "outputs": {"v": {"type": "integer"}},
            "next": "c2",
        },
        "c2": {
            "kind": "action",
            "executor": "work",
            "outputs": {"v": {"type": "integer"}},
            "next": "join",
        },
        "join": {"kind": "barrier", "next": "after"},
        "after": {
            "kind": "action",
            "executor": "after",
            "inputs": {"a": "a3.v?", "b": "b.v?", "c": "c2.v?"},
            "outputs": {"again": {"enum": ["yes", "no"]}},
            "routes": {"port": "again", "cases": {"yes": "plan", "no": "done"}},
            "max_visits": 3,
        },
        "done": {"kind": "terminal", "outcome": "succeeded"},
    }
    if select:
        nodes["fan"]["select"] = "plan.pick"
    if not loop:
        nodes["after"]["routes"] = {"port": "again", "cases": {"yes": "done", "no": "done"}}
    return graph_doc(nodes, "plan")


def _runs(events: list[dict[str, Any]], node: str) -> int:
    return sum(1 for e in events if e["node"] == node and e["transition"] == "work-completed")


def test_subset_selection_runs_only_the_selected_branches_and_joins_once(harness: Any) -> None:
    seen: list[dict[str, Any]] = []

    async def after(req: InvocationRequest) -> Any:
        seen.append(dict(req.input))
        return reply({"again": "no"})

    h = harness(
        {
            "plan": lambda r: asyncio.sleep(0, reply({"pick": ["c", "a"]})),
            "work": lambda r: asyncio.sleep(0, reply({"v": r.activation})),
            "after": after,
        }
    )
    delivery = make_delivery(_fanout(select=True))
    report = h.run(delivery)
    assert report.status.value == "completed"
    events = h.events(delivery)
    assert _runs(events, "b") == 0
    assert _runs(events, "a3") == 1 and _runs(events, "c2") == 1
    assert _runs(events, "join") == 1, "the barrier fires exactly once"
    assert seen == [{"a": 1, "c": 1}], "the unselected branch's optional read is absent"
    nodes = h.inspect(delivery).nodes
    assert nodes["b"].state == "pending" and nodes["join"].activations == 1


def test_no_select_runs_every_branch(harness: Any) -> None:
    h = harness(
        {
            "plan": lambda r: asyncio.sleep(0, reply({"pick": []})),
            "work": lambda r: asyncio.sleep(0, reply({"v": 1})),
            "after": lambda r: asyncio.sleep(0, reply({"again": "no"})),
        }
    )
    delivery = make_delivery(_fanout(select=False))
    assert h.run(delivery).status.value == "completed"
    events = h.events(delivery)
    assert [_runs(events, n) for n in ("a3", "b", "c2", "join")] == [1, 1, 1, 1]


def test_each_round_joins_exactly_its_own_selection(harness: Any) -> None:
    picks = iter([["a", "b", "c"], ["b"], ["c"]])
    reads: list[dict[str, Any]] = []

    async def after(req: InvocationRequest) -> Any:
        reads.append(dict(req.input))
        return reply({"again": "yes" if req.activation < 3 else "no"})

    h = harness(
        {
            "plan": lambda r: asyncio.sleep(0, reply({"pick": next(picks)})),
            "work": lambda r: asyncio.sleep(0, reply({"v": r.activation})),
            "after": after,
        }
    )
    delivery = make_delivery(_fanout(select=True, loop=True))
    assert h.run(delivery).status.value == "completed"
    events = h.events(delivery)
    assert _runs(events, "join") == 3
    # Round 2 selected only 'b': marks left by 'a' and 'c' in round 1 must not count,
    # and their round-1 outputs must not be visible.
    assert reads == [{"a": 1, "b": 1, "c": 1}, {"b": 2}, {"c": 2}]


@pytest.mark.parametrize(
    ("pick", "code", "check"),
    [
        ([], "SELECTION_EMPTY", True),
        (["a", "a"], "SELECTION_DUPLICATE", True),
        (["b"], "SELECTION_MISSING_REQUIRED", True),
        (["a", "zzz"], "SELECTION_UNDECLARED", False),
    ],
)
def test_a_bad_selection_fails_before_any_branch_runs(
    harness: Any, pick: list[str], code: str, check: bool
) -> None:
    doc = _fanout(select=True, required=["a"])
    if not check:
        # Admission would refuse this open port; the Host must refuse it again at run time.
        doc["nodes"]["plan"]["outputs"]["pick"] = {"type": "array", "items": {"type": "string"}}
    h = harness(
        {
            "plan": lambda r: asyncio.sleep(0, reply({"pick": pick})),
            "work": lambda r: asyncio.sleep(0, reply({"v": 1})),
            "after": lambda r: asyncio.sleep(0, reply({"again": "no"})),
        }
    )
    delivery = make_delivery(doc, check=check)
    report = h.run(delivery)
    assert report.status.value == "failed"
    assert report.outcome == code
    assert not any(c.node in {"a", "b", "c"} for c in h.invoker.calls)
    assert h.inspect(delivery).nodes["fan"].state == "failed"


def test_a_stale_selection_from_an_earlier_round_is_refused(harness: Any) -> None:
    # 'gate' can bypass the planner in round two, so the only selection left is
    # round one's. Admission refuses this graph (the read is not guaranteed); the
    # Host must refuse the stale selection again at run time.
    doc = _fanout(select=True, loop=True)
    doc["start"] = "gate"
    doc["nodes"]["gate"] = {
        "kind": "action",
        "executor": "gate",
        "outputs": {"way": {"enum": ["plan", "reuse"]}},
        "routes": {"port": "way", "cases": {"plan": "plan", "reuse": "fan"}},
        "max_visits": 3,
    }
    doc["nodes"]["after"]["routes"]["cases"]["yes"] = "gate"
    doc["nodes"]["fan"]["max_visits"] = 3
    h = harness(
        {
            "gate": lambda r: asyncio.sleep(
                0, reply({"way": "plan" if r.activation == 1 else "reuse"})
            ),
            "plan": lambda r: asyncio.sleep(0, reply({"pick": ["b"]})),
            "work": lambda r: asyncio.sleep(0, reply({"v": 1})),
            "after": lambda r: asyncio.sleep(0, reply({"again": "yes"})),
        }
    )
    delivery = make_delivery(doc, check=False)
    report = h.run(delivery)
    assert (report.status.value, report.outcome) == ("failed", "SELECTION_STALE")
    assert sum(1 for c in h.invoker.calls if c.node == "b") == 1


def test_a_route_value_picks_exactly_its_declared_successor(harness: Any) -> None:
    doc = graph_doc(
        {
            "decide": {
                "kind": "action",
                "executor": "decide",
                "outputs": {"way": {"enum": ["left", "right"]}},
                "routes": {"port": "way", "cases": {"left": "l", "right": "r"}},
            },
            "l": {"kind": "terminal", "outcome": "failed"},
            "r": {"kind": "terminal", "outcome": "succeeded"},
        },
        "decide",
    )
    h = harness({"decide": lambda r: asyncio.sleep(0, reply({"way": "right"}))})
    delivery = make_delivery(doc)
    report = h.run(delivery)
    assert (report.status.value, report.outcome) == ("completed", "succeeded")
    assert h.inspect(delivery).nodes["l"].state == "pending"


def test_exceeding_max_visits_fails_with_its_code(harness: Any) -> None:
    doc = graph_doc(
        {
            "spin": {
                "kind": "action",
                "executor": "spin",
                "outputs": {"again": {"enum": ["yes", "no"]}},
                "routes": {"port": "again", "cases": {"yes": "spin", "no": "done"}},
                "max_visits": 4,
            },
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        "spin",
    )
    h = harness({"spin": lambda r: asyncio.sleep(0, reply({"again": "yes"}))})
    delivery = make_delivery(doc)
    report = h.run(delivery)
    assert (report.status.value, report.outcome) == ("failed", "MAX_VISITS_EXCEEDED")
    assert len(h.invoker.calls) == 4


def test_a_back_edge_clears_the_round_it_leaves(harness: Any) -> None:
    # Round 1 takes the 'long' way through 'extra'; round 2 skips it. Its output
    # must not be visible in round 2 (reads see only the current round).
    doc = graph_doc(
        {
            "route": {
                "kind": "action",
                "executor": "route",
                "outputs": {"way": {"enum": ["long", "short"]}},
                "routes": {"port": "way", "cases": {"long": "extra", "short": "read"}},
                "max_visits": 2,
            },
            "extra": {
                "kind": "action",
                "executor": "extra",
                "outputs": {"v": {"type": "integer"}},
                "next": "read",
            },
            "read": {
                "kind": "action",
                "executor": "read",
                "inputs": {"v": "extra.v?"},
                "outputs": {"again": {"enum": ["yes", "no"]}},
                "routes": {"port": "again", "cases": {"yes": "route", "no": "done"}},
                "max_visits": 2,
            },
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        "route",
    )
    seen: list[dict[str, Any]] = []

    async def read(req: InvocationRequest) -> Any:
        seen.append(dict(req.input))
        return reply({"again": "yes" if req.activation == 1 else "no"})

    h = harness(
        {
            "route": lambda r: asyncio.sleep(
                0, reply({"way": "long" if r.activation == 1 else "short"})
            ),
            "extra": lambda r: asyncio.sleep(0, reply({"v": 7})),
            "read": read,
        }
    )
    assert h.run(make_delivery(doc)).status.value == "completed"
    assert seen == [{"v": 7}, {}]


# --- rules each pinned by one test ------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_selection_comes_back_in_declaration_order_whatever_the_planner_order(
    data: st.DataObject,
) -> None:
    node = parse_graph(_fanout(select=True, required=["b"])).nodes["fan"]
    assert isinstance(node, ParallelNode)
    chosen = [*data.draw(st.sets(st.sampled_from(["a", "c"])).map(sorted)), "b"]
    planner_order = data.draw(st.permutations(chosen))
    assert check_selection("fan", node, planner_order) == [
        b for b in ("a", "b", "c") if b in chosen
    ]


def test_a_barrier_never_counts_a_mark_left_by_an_earlier_round(harness: Any) -> None:
    # Round 2 selects a and b again. 'b' (one step) arrives long before 'a'
    # (three steps); a's mark from round 1 must not let the join fire early.
    picks = iter([["a", "b", "c"], ["a", "b"]])
    reads: list[dict[str, Any]] = []

    async def after(req: InvocationRequest) -> Any:
        reads.append(dict(req.input))
        return reply({"again": "yes" if req.activation < 2 else "no"})

    h = harness(
        {
            "plan": lambda r: asyncio.sleep(0, reply({"pick": next(picks)})),
            "work": lambda r: asyncio.sleep(0, reply({"v": r.activation})),
            "after": after,
        }
    )
    delivery = make_delivery(_fanout(select=True, loop=True))
    assert h.run(delivery).status.value == "completed"
    assert _runs(h.events(delivery), "join") == 2
    assert reads == [{"a": 1, "b": 1, "c": 1}, {"a": 2, "b": 2}]


def test_a_route_value_outside_the_cases_fails_with_its_code(harness: Any) -> None:
    # Admission requires an enum route port; a delivery built without admission
    # shows that the Host refuses an undeclared value itself, with a code.
    doc = graph_doc(
        {
            "decide": {
                "kind": "action",
                "executor": "decide",
                "outputs": {"way": {"type": "string"}},
                "routes": {"port": "way", "cases": {"left": "l", "right": "r"}},
            },
            "l": {"kind": "terminal", "outcome": "succeeded"},
            "r": {"kind": "terminal", "outcome": "succeeded"},
        },
        "decide",
    )
    h = harness({"decide": lambda r: asyncio.sleep(0, reply({"way": "sideways"}))})
    delivery = make_delivery(doc, check=False)
    report = h.run(delivery)
    assert (report.status.value, report.outcome) == ("failed", "ROUTE_VALUE_UNDECLARED")
    failed = [e for e in h.events(delivery) if e["transition"] == "work-failed"]
    assert [(e["node"], e["error"]["code"]) for e in failed] == [
        ("decide", "ROUTE_VALUE_UNDECLARED")
    ]


def test_a_barrier_fires_at_most_once_per_round(harness: Any) -> None:
    # Admission refuses entering a branch from outside its region; built without
    # admission, 'after' sends 'b' to the join a second time in the same round.
    # The join has fired for this round already and must not fire again.
    doc = graph_doc(
        {
            "fan": {"kind": "parallel", "branches": ["a", "b"], "barrier": "join"},
            "a": {
                "kind": "action",
                "executor": "work",
                "outputs": {"v": {"type": "integer"}},
                "next": "join",
            },
            "b": {
                "kind": "action",
                "executor": "work",
                "outputs": {"v": {"type": "integer"}},
                "next": "join",
                "max_visits": 3,
            },
            "join": {"kind": "barrier", "next": "after", "max_visits": 3},
            "after": {
                "kind": "action",
                "executor": "after",
                "outputs": {"again": {"enum": ["yes", "no"]}},
                "routes": {"port": "again", "cases": {"yes": "b", "no": "done"}},
                "max_visits": 3,
            },
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        "fan",
    )
    h = harness(
        {
            "work": lambda r: asyncio.sleep(0, reply({"v": r.activation})),
            "after": lambda r: asyncio.sleep(
                0, reply({"again": "yes" if r.activation == 1 else "no"})
            ),
        }
    )
    delivery = make_delivery(doc, check=False)
    report = h.run(delivery)
    events = h.events(delivery)
    assert (_runs(events, "b"), _runs(events, "join"), _runs(events, "after")) == (2, 1, 1)
    assert report.status.value == "intervention", "nothing runnable is left; no guess"


def test_a_new_parallel_round_clears_what_its_branches_produced_before(harness: Any) -> None:
    # 'b2' fails over to 'plan' while branch 'a' is still running, so a3's round-1
    # output lands after the back edge cleared the loop (admission refuses a failure
    # successor that leaves its branch). Round 2 selects only 'b': the reader must
    # not see a3's round-1 value; the parallel itself clears its branches.
    doc = _fanout(select=True)
    doc["nodes"]["plan"]["outputs"]["pick"]["items"]["enum"] = ["a", "b"]
    doc["nodes"]["fan"].update(branches=["a", "b"], max_visits=3)
    del doc["nodes"]["c"], doc["nodes"]["c2"]
    doc["nodes"]["b"]["next"] = "b2"
    doc["nodes"]["b2"] = {
        "kind": "action",
        "executor": "flaky",
        "outputs": {"v": {"type": "integer"}},
        "next": "join",
        "on_failure": "plan",
    }
    doc["nodes"]["after"]["inputs"] = {"a": "a3.v?", "b": "b2.v?"}
    picks = iter([["a", "b"], ["b"]])
    reads: list[dict[str, Any]] = []

    async def after(req: InvocationRequest) -> Any:
        reads.append(dict(req.input))
        return reply({"again": "no"})

    async def flaky(req: InvocationRequest) -> Any:
        if req.activation == 1:
            return {"status": "failed", "reason": "boom", "retryable": False}
        return reply({"v": req.activation})

    h = harness(
        {
            "plan": lambda r: asyncio.sleep(0, reply({"pick": next(picks)})),
            "work": lambda r: asyncio.sleep(0, reply({"v": r.activation})),
            "after": after,
            "flaky": flaky,
        }
    )
    delivery = make_delivery(doc, check=False)
    assert h.run(delivery).status.value == "completed"
    order = [e["node"] for e in h.events(delivery) if e["transition"] == "work-completed"]
    assert order.index("a3") < order.index("fan", order.index("plan", 1)), "a3 lands first"
    assert reads == [{"b": 2}]
