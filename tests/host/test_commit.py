"""The commit protocol: validate, preview, custody, apply — in that order, or nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contracts import DeliveryId, InvocationRequest, SavepointId
from tests.host.harness import graph_doc, make_delivery, reply
from tests.support.memory_custody import MemoryCustody


def _two_steps(port_schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return graph_doc(
        {
            "first": {
                "kind": "action",
                "executor": "first",
                "workspace": "write",
                "outputs": {"n": port_schema or {"type": "integer", "maximum": 10}},
                "next": "second",
            },
            "second": {
                "kind": "action",
                "executor": "second",
                "inputs": {"n": "first.n"},
                "outputs": {"ok": {"type": "boolean"}},
                "next": "done",
            },
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        "first",
    )


def test_custody_sees_the_preview_only_after_host_validation_and_before_apply(
    harness: Any,
) -> None:
    custody = MemoryCustody()
    h = harness(
        {
            "first": lambda r: asyncio.sleep(0, reply({"n": 3})),
            "second": lambda r: asyncio.sleep(0, reply({"ok": r.input["n"] == 3})),
        },
        custody=custody,
    )
    delivery = make_delivery(_two_steps())
    assert h.run(delivery).status.value == "completed"
    ops = [op for op, _ in custody.calls if op != "open"]
    # Per step: capability issued, executor runs, then custody validates, then advances.
    assert ops == ["issue", "validate", "advance", "issue", "validate", "advance"]
    assert h.inspect(delivery).custody.savepoint == custody.heads[delivery.delivery_id]


@pytest.mark.parametrize(
    ("output", "code"),
    [
        ({"n": 11}, "OUTPUT_SCHEMA_VIOLATION"),
        ({"n": "3"}, "OUTPUT_SCHEMA_VIOLATION"),
        ({}, "OUTPUT_MISSING_PORT"),
        ({"n": 1, "extra": 2}, "OUTPUT_UNDECLARED_PORT"),
    ],
)
def test_an_invalid_output_never_reaches_custody_or_state(
    harness: Any, output: dict[str, Any], code: str
) -> None:
    custody = MemoryCustody()
    h = harness(
        {
            "first": lambda r: asyncio.sleep(0, reply(output)),
            "second": lambda r: asyncio.sleep(0, reply({"ok": True})),
        },
        custody=custody,
    )
    delivery = make_delivery(_two_steps())
    report = h.run(delivery)
    assert (report.status.value, report.outcome) == ("failed", code)
    assert ("validate", "first") not in custody.calls, "host validation comes first"
    assert ("restore", delivery.delivery_id) in custody.calls, "the base savepoint is restored"
    assert not any(c.node == "second" for c in h.invoker.calls)
    assert report.message.startswith("node 'first' failed")


def test_a_custody_rejection_restores_and_follows_the_failure_rules(harness: Any) -> None:
    custody = MemoryCustody(reject_nodes={"first"})
    doc = _two_steps()
    doc["nodes"]["first"]["on_failure"] = "fallback"
    doc["nodes"]["fallback"] = {"kind": "terminal", "outcome": "blocked"}
    h = harness(
        {
            "first": lambda r: asyncio.sleep(0, reply({"n": 1})),
            "second": lambda r: asyncio.sleep(0, reply({"ok": True})),
        },
        custody=custody,
    )
    delivery = make_delivery(doc)
    report = h.run(delivery)
    assert (report.status.value, report.outcome) == ("failed", "blocked")
    ops = [op for op, _ in custody.calls if op != "open"]
    assert ops == ["issue", "validate", "restore"]
    failed = [e for e in h.events(delivery) if e["transition"] == "work-failed"]
    assert failed[0]["error"]["code"] == "CUSTODY_REJECTED"


def test_an_uncertain_restore_is_an_intervention_never_a_guessed_failure(harness: Any) -> None:
    custody = MemoryCustody(reject_nodes={"first"}, uncertain_restore=True)
    h = harness(
        {
            "first": lambda r: asyncio.sleep(0, reply({"n": 1})),
            "second": lambda r: asyncio.sleep(0, reply({"ok": True})),
        },
        custody=custody,
    )
    delivery = make_delivery(_two_steps())
    report = h.run(delivery)
    assert report.status.value == "intervention"
    assert "uncertain" in report.message
    assert "recover continue" in h.inspect(delivery).directives


class _AdvanceFails(MemoryCustody):
    """Accepts every preview, then cannot move its head."""

    def advance(self, delivery: DeliveryId, savepoint: SavepointId) -> None:
        self.calls.append(("advance", delivery))
        raise OSError("disk full")


def test_an_advance_failing_after_an_accepted_validation_is_an_intervention(
    harness: Any,
) -> None:
    custody = _AdvanceFails()
    h = harness(
        {
            "first": lambda r: asyncio.sleep(0, reply({"n": 1})),
            "second": lambda r: asyncio.sleep(0, reply({"ok": True})),
        },
        custody=custody,
    )
    delivery = make_delivery(_two_steps())
    report = h.run(delivery)
    assert report.status.value == "intervention"
    assert "advance" in report.message
    assert not any(e["transition"] == "work-completed" for e in h.events(delivery))
    assert not any(c.node == "second" for c in h.invoker.calls)
    assert h.inspect(delivery).nodes["first"].state != "completed"


def _failing_first(retryable: bool) -> Any:
    async def run(req: InvocationRequest) -> Any:
        return {"status": "failed", "reason": "boom", "retryable": retryable}

    return run


@pytest.mark.parametrize("retryable", [False, True])
def test_an_executor_failure_restores_the_base_savepoint_first(
    harness: Any, retryable: bool
) -> None:
    custody = MemoryCustody()
    doc = _two_steps()
    if retryable:
        doc["nodes"]["first"]["retry"] = {"max_attempts": 2, "backoff_s": 0}
    h = harness({"first": _failing_first(retryable)}, custody=custody)
    delivery = make_delivery(doc)
    report = h.run(delivery)
    assert report.status.value == "failed"
    ops = [op for op, _ in custody.calls if op != "open"]
    # Every failed turn puts the workspace back before anything else happens.
    assert ops == ["issue", "restore"] * (2 if retryable else 1)


def test_an_uncertain_restore_after_an_executor_failure_is_an_intervention(
    harness: Any,
) -> None:
    custody = MemoryCustody(uncertain_restore=True)
    h = harness({"first": _failing_first(False)}, custody=custody)
    delivery = make_delivery(_two_steps())
    report = h.run(delivery)
    assert report.status.value == "intervention"
    assert "uncertain" in report.message
    assert not any(e["transition"] == "work-failed" for e in h.events(delivery))
