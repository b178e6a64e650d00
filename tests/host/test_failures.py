"""Failure routing: retries, failure successors, fail-closed, unknown outcomes, siblings."""

from __future__ import annotations

import asyncio
from typing import Any

from contracts import InvocationRequest
from tests.host.harness import graph_doc, make_delivery, reply


def _flaky_graph(retry: dict[str, Any] | None, on_failure: str | None) -> dict[str, Any]:
    node: dict[str, Any] = {
        "kind": "action",
        "executor": "flaky",
        "outputs": {"ok": {"type": "boolean"}},
        "next": "done",
    }
    if retry:
        node["retry"] = retry
    if on_failure:
        node["on_failure"] = on_failure
    nodes: dict[str, Any] = {"flaky": node, "done": {"kind": "terminal", "outcome": "succeeded"}}
    if on_failure:
        nodes[on_failure] = {"kind": "terminal", "outcome": "blocked"}
    return graph_doc(nodes, "flaky")


def _fails(times: int, retryable: bool) -> Any:
    async def run(req: InvocationRequest) -> Any:
        if req.attempt <= times:
            return {"status": "failed", "reason": "boom", "retryable": retryable}
        return reply({"ok": True})

    return run


def test_retryable_failures_retry_and_every_attempt_is_journaled(harness: Any) -> None:
    h = harness({"flaky": _fails(2, retryable=True)})
    doc = _flaky_graph({"max_attempts": 3, "backoff_s": 0.01}, None)
    delivery = make_delivery(doc)
    report = h.run(delivery)
    assert report.status.value == "completed"
    view = h.inspect(delivery).nodes["flaky"]
    assert view.attempts == 3 and view.state == "completed"
    kinds = [e["transition"] for e in h.events(delivery) if e["node"] == "flaky"]
    assert kinds.count("work-failed") == 2 and kinds.count("retry-authorized") == 2


def test_exhausted_retries_follow_on_failure(harness: Any) -> None:
    h = harness({"flaky": _fails(5, retryable=True)})
    delivery = make_delivery(_flaky_graph({"max_attempts": 2}, "rescue"))
    report = h.run(delivery)
    assert (report.status.value, report.outcome) == ("failed", "blocked")
    assert h.inspect(delivery).nodes["flaky"].attempts == 2


def test_non_retryable_failure_is_not_retried(harness: Any) -> None:
    h = harness({"flaky": _fails(1, retryable=False)})
    delivery = make_delivery(_flaky_graph({"max_attempts": 5}, "rescue"))
    report = h.run(delivery)
    assert report.outcome == "blocked"
    assert len(h.invoker.calls) == 1


def test_without_a_failure_successor_the_delivery_fails_closed(harness: Any) -> None:
    h = harness({"flaky": _fails(1, retryable=False)})
    delivery = make_delivery(_flaky_graph(None, None))
    report = h.run(delivery)
    assert (report.status.value, report.outcome) == ("failed", "NODE_FAILED")


def test_an_unknown_outcome_is_an_intervention(harness: Any) -> None:
    async def explode(req: InvocationRequest) -> Any:
        raise RuntimeError("the invoker itself broke")

    h = harness({"flaky": explode})
    delivery = make_delivery(_flaky_graph({"max_attempts": 3}, "rescue"))

    class Breaking:
        async def __call__(self, *a: Any, **k: Any) -> Any:
            raise RuntimeError("lost contact with the executor")

    h.host.invoker = Breaking()
    report = h.run(delivery)
    assert report.status.value == "intervention"


def test_a_malformed_reply_is_a_protocol_failure(harness: Any) -> None:
    h = harness({"flaky": lambda r: asyncio.sleep(0, {"status": "done", "output": 1})})
    delivery = make_delivery(_flaky_graph(None, None))
    report = h.run(delivery)
    assert (report.status.value, report.outcome) == ("failed", "EXECUTOR_PROTOCOL_ERROR")


def test_reaching_a_terminal_stops_and_records_in_flight_siblings(harness: Any) -> None:
    doc = graph_doc(
        {
            "fan": {"kind": "parallel", "branches": ["quick", "slow"], "barrier": "join"},
            "quick": {
                "kind": "action",
                "executor": "quick",
                "outputs": {"ok": {"type": "boolean"}},
                "on_failure": "abort",
                "next": "join",
            },
            "slow": {
                "kind": "action",
                "executor": "slow",
                "outputs": {"ok": {"type": "boolean"}},
                "next": "join",
            },
            "join": {"kind": "barrier", "next": "done"},
            "abort": {"kind": "terminal", "outcome": "failed"},
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        "fan",
    )
    finished: list[str] = []

    async def slow(req: InvocationRequest) -> Any:
        await asyncio.sleep(30)
        finished.append("slow")
        return reply({"ok": True})

    async def quick(req: InvocationRequest) -> Any:
        return {"status": "failed", "reason": "broken", "retryable": False}

    # 'abort' runs in the super-step after 'quick' fails, while 'slow' is still running.
    h = harness({"quick": quick, "slow": slow})
    delivery = make_delivery(doc)
    report = h.run(delivery)
    assert (report.status.value, report.outcome) == ("failed", "failed")
    assert finished == []
    stopped = [
        e for e in h.events(delivery) if e["node"] == "slow" and e["transition"] == "work-failed"
    ]
    assert stopped and stopped[0]["error"]["code"] == "SIBLING_STOPPED"
