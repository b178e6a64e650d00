"""Action-inputs and workflow waits: one continuation, the right kind, admitted actors."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contracts import AuthorityPolicy, ErrorCode, ExecsysError, InvocationRequest
from tests.host.harness import graph_doc, make_delivery, reply


def _ask(turns: int) -> Any:
    async def run(req: InvocationRequest) -> Any:
        if req.turn < turns:
            return {
                "status": "needs-input",
                "question": f"q{req.turn}",
                "session": "s-" + req.invocation,
            }
        assert req.session == "s-" + req.invocation
        return reply({"answer": str(req.response)})

    return run


def _asker_graph() -> dict[str, Any]:
    return graph_doc(
        {
            "ask": {
                "kind": "action",
                "executor": "asker",
                "outputs": {"answer": {"type": "string"}},
                "next": "done",
            },
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        "ask",
    )


def test_several_turns_continue_one_invocation_and_no_turn_runs_twice(harness: Any) -> None:
    h = harness({"asker": _ask(3)})
    delivery = make_delivery(_asker_graph())
    report = h.run(delivery)
    invocation = h.invoker.calls[0].invocation
    for _ in range(2):
        assert report.status.value == "suspended"
        report = asyncio.run(
            h.host.answer(delivery.delivery_id, report.suspension.correlation, "left")
        )
    assert report.status.value == "completed"
    assert [c.turn for c in h.invoker.calls] == [1, 2, 3]
    assert {c.invocation for c in h.invoker.calls} == {invocation}
    assert all(n == 1 for n in h.invoker.turns.values())
    assert h.inspect(delivery).nodes["ask"].attempts == 1


def test_unknown_used_and_stale_correlations_are_refused(harness: Any) -> None:
    h = harness({"asker": _ask(3)})
    delivery = make_delivery(_asker_graph())
    first = h.run(delivery).suspension.correlation
    with pytest.raises(ExecsysError) as unknown:
        asyncio.run(h.host.answer(delivery.delivery_id, "c-nope", "x"))
    assert unknown.value.code is ErrorCode.CORRELATION_UNKNOWN
    asyncio.run(h.host.answer(delivery.delivery_id, first, "x"))
    with pytest.raises(ExecsysError) as used:
        asyncio.run(h.host.answer(delivery.delivery_id, first, "x"))
    assert used.value.code is ErrorCode.CORRELATION_USED
    calls = len(h.invoker.calls)
    assert calls == 2, "a refused answer continues nothing"


def test_two_parallel_suspensions_answered_one_at_a_time(harness: Any) -> None:
    doc = graph_doc(
        {
            "fan": {"kind": "parallel", "branches": ["left", "right"], "barrier": "join"},
            "left": {
                "kind": "action",
                "executor": "asker",
                "outputs": {"answer": {"type": "string"}},
                "next": "join",
            },
            "right": {
                "kind": "action",
                "executor": "asker",
                "outputs": {"answer": {"type": "string"}},
                "next": "join",
            },
            "join": {"kind": "barrier", "next": "done"},
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        "fan",
    )
    h = harness({"asker": _ask(2)})
    delivery = make_delivery(doc)
    report = h.run(delivery)
    assert report.status.value == "suspended" and len(report.suspensions) == 2
    by_node = {s.node: s.correlation for s in report.suspensions}
    report = asyncio.run(h.host.answer(delivery.delivery_id, by_node["left"], "L"))
    assert report.status.value == "suspended"
    assert [s.node for s in report.suspensions] == ["right"], "right still waits, untouched"
    report = asyncio.run(h.host.answer(delivery.delivery_id, by_node["right"], "R"))
    assert report.status.value == "completed"
    assert all(n == 1 for n in h.invoker.turns.values()), h.invoker.turns
    assert sorted((c.node, c.turn) for c in h.invoker.calls) == [
        ("left", 1),
        ("left", 2),
        ("right", 1),
        ("right", 2),
    ]


def _wait_graph(min_count: int = 1, distinct: bool = True) -> dict[str, Any]:
    return graph_doc(
        {
            "work": {
                "kind": "action",
                "executor": "worker",
                "outputs": {"ok": {"type": "boolean"}},
                "next": "approve",
            },
            "approve": {
                "kind": "wait",
                "wait": "approval",
                "result": {
                    "type": "object",
                    "properties": {"approved": {"type": "boolean"}},
                    "required": ["approved"],
                },
                "authority": {
                    "roles": ["maintainer"],
                    "min_count": min_count,
                    "distinct_actors": distinct,
                },
                "next": "done",
            },
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        "work",
    )


POLICY = AuthorityPolicy(
    actors={"alice": ("maintainer",), "bob": ("maintainer",), "eve": ("reviewer",)},
    approver="alice",
)


@pytest.mark.parametrize(
    ("actor", "role", "result", "code"),
    [
        ("mallory", "maintainer", {"approved": True}, ErrorCode.ACTOR_NOT_ADMITTED),
        ("eve", "maintainer", {"approved": True}, ErrorCode.ROLE_NOT_ADMITTED),
        ("eve", "reviewer", {"approved": True}, ErrorCode.ROLE_NOT_ADMITTED),
        ("alice", "maintainer", {"approved": "yes"}, ErrorCode.WAIT_RESULT_INVALID),
        ("alice", "maintainer", {}, ErrorCode.WAIT_RESULT_INVALID),
    ],
)
def test_a_wait_accepts_only_admitted_actors_and_valid_results(
    harness: Any, actor: str, role: str, result: Any, code: ErrorCode
) -> None:
    h = harness({"worker": lambda r: asyncio.sleep(0, reply({"ok": True}))})
    delivery = make_delivery(_wait_graph(), authority=POLICY)
    assert h.run(delivery).status.value == "waiting"
    with pytest.raises(ExecsysError) as refused:
        asyncio.run(h.host.resolve(delivery.delivery_id, "approve", actor, role, result))
    assert refused.value.code is code
    assert h.host.status(delivery.delivery_id).status.value == "waiting"


def test_min_count_and_distinct_actors_are_honoured_and_journaled(harness: Any) -> None:
    h = harness({"worker": lambda r: asyncio.sleep(0, reply({"ok": True}))})
    delivery = make_delivery(_wait_graph(min_count=2), authority=POLICY)
    h.run(delivery)
    did = delivery.delivery_id
    report = asyncio.run(h.host.resolve(did, "approve", "alice", "maintainer", {"approved": True}))
    assert report.status.value == "waiting", "one of two approvals"
    with pytest.raises(ExecsysError) as twice:
        asyncio.run(h.host.resolve(did, "approve", "alice", "maintainer", {"approved": True}))
    assert twice.value.code is ErrorCode.APPROVAL_DUPLICATE_ACTOR
    report = asyncio.run(h.host.resolve(did, "approve", "bob", "maintainer", {"approved": True}))
    assert report.status.value == "completed"
    done = [
        e
        for e in h.events(delivery)
        if e["node"] == "approve" and e["transition"] == "work-completed"
    ]
    assert [a["actor"] for a in done[0]["approvals"]] == ["alice", "bob"]
    assert done[0]["actor"]["kind"] == "human"


def test_the_two_suspension_kinds_are_not_interchangeable(harness: Any) -> None:
    h = harness({"worker": lambda r: asyncio.sleep(0, reply({"ok": True})), "asker": _ask(2)})
    waiting = make_delivery(_wait_graph(), authority=POLICY, nonce="w")
    h.run(waiting)
    with pytest.raises(ExecsysError) as through_input:
        asyncio.run(h.host.answer(waiting.delivery_id, "c-anything", {"approved": True}))
    assert through_input.value.code is ErrorCode.SUSPENSION_KIND_MISMATCH
    asking = make_delivery(_asker_graph(), nonce="a")
    h.run(asking)
    with pytest.raises(ExecsysError) as through_resolve:
        asyncio.run(h.host.resolve(asking.delivery_id, "ask", "alice", "maintainer", {}))
    assert through_resolve.value.code is ErrorCode.SUSPENSION_KIND_MISMATCH


def test_an_answer_on_a_delivery_that_cannot_run_is_refused(harness: Any) -> None:
    h = harness({"asker": _ask(2)})
    delivery = make_delivery(_asker_graph())
    correlation = h.run(delivery).suspension.correlation
    assert asyncio.run(h.host.stop(delivery.delivery_id)).status.value == "stopped"
    with pytest.raises(ExecsysError) as refused:
        asyncio.run(h.host.answer(delivery.delivery_id, correlation, "late"))
    assert refused.value.code is ErrorCode.DELIVERY_NOT_RUNNABLE
    assert h.host.status(delivery.delivery_id).status.value == "stopped"
    assert [c.turn for c in h.invoker.calls] == [1], "a refused answer continues nothing"


def test_approvals_of_one_wait_must_agree_on_the_result(harness: Any) -> None:
    h = harness({"worker": lambda r: asyncio.sleep(0, reply({"ok": True}))})
    delivery = make_delivery(_wait_graph(min_count=2), authority=POLICY)
    h.run(delivery)
    did = delivery.delivery_id
    asyncio.run(h.host.resolve(did, "approve", "alice", "maintainer", {"approved": True}))
    with pytest.raises(ExecsysError) as differs:
        asyncio.run(h.host.resolve(did, "approve", "bob", "maintainer", {"approved": False}))
    assert differs.value.code is ErrorCode.WAIT_RESULT_INVALID
    assert h.host.status(did).status.value == "waiting"
    report = asyncio.run(h.host.resolve(did, "approve", "bob", "maintainer", {"approved": True}))
    assert report.status.value == "completed"
    approvals = [e for e in h.events(delivery) if e["transition"] == "block-cleared"]
    assert [e["actor"]["id"] for e in approvals] == ["alice", "bob"]


def test_the_cheap_values_read_agrees_with_the_full_snapshot(harness: Any) -> None:
    """``values`` reads the checkpoint alone; at every stop it equals ``snapshot().values``."""
    h = harness({"asker": _ask(3)})
    delivery = make_delivery(_asker_graph())
    substrate = h.host.substrate
    seen = []
    report = h.run(delivery)
    while True:
        full = asyncio.run(substrate.snapshot(delivery)).values
        assert asyncio.run(substrate.values(delivery)) == full
        seen.append(report.status.value)
        if report.status.value != "suspended":
            break
        report = asyncio.run(
            h.host.answer(delivery.delivery_id, report.suspension.correlation, "left")
        )
    assert seen == ["suspended", "suspended", "completed"]
    # A write outside any task would be applied by a snapshot; the saver keeps none.
    from langgraph._internal._constants import NULL_TASK_ID

    did = delivery.delivery_id
    saver = substrate.saver
    saver.tokens[did] = h.host.leases.acquire(did)
    saved = saver.get_tuple(substrate._config(delivery))
    saver.put_writes(saved.config, [("outputs", {"extra": {"mark": 1}})], NULL_TASK_ID)
    h.host.leases.release(did)
    assert saver.get_tuple(substrate._config(delivery)).pending_writes == []
    assert (
        asyncio.run(substrate.values(delivery)) == asyncio.run(substrate.snapshot(delivery)).values
    )
