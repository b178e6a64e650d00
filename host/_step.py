"""The step primitives every node kind shares: inputs, start, commit, failure, successors.

A node's super-step reads the scheduled site from committed state, does the
node's work through a :class:`StepWriter`, and ends in a :class:`StepResult`
whose update is the whole effect of the step (state, journal drafts, records)
and whose ``goto`` names the successors it scheduled. Nothing a step does is
visible to anyone until the checkpoint of its super-step commits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contracts import ErrorCode, NodeState, Reference, Transition, error
from contracts._status import HALTED
from host._context import DeliveryContext, StepWriter
from host._validate import route_target


@dataclass(frozen=True)
class StepResult:
    """The whole effect of one node's super-step, for the substrate to commit."""

    update: dict[str, Any]
    """Channel updates (state, journal drafts and records in ``outbox``)."""
    goto: tuple[str, ...]
    """The successors this step scheduled."""


def finish(writer: StepWriter) -> StepResult:
    """Turn a writer into the step's result."""
    update: dict[str, Any] = dict(writer.updates)
    if writer.outbox:
        update["outbox"] = writer.outbox
    return StepResult(update=update, goto=tuple(writer.goto))


def is_halted(state: Mapping[str, Any]) -> bool:
    """Whether the delivery no longer runs (terminal, stopped or in intervention)."""
    return (state.get("run") or {}).get("status") in HALTED


def materialize(
    ctx: DeliveryContext, state: Mapping[str, Any], node_id: str, inputs: Mapping[str, str]
) -> dict[str, Any]:
    """Build a node's typed input from committed state of the current round."""
    values: dict[str, Any] = {}
    outputs = state.get("outputs") or {}
    for name, text in inputs.items():
        ref = Reference.parse(text)
        if ref.source == "input":
            if ref.port in ctx.delivery.input:
                values[name] = ctx.delivery.input[ref.port]
            elif not ref.optional:
                raise error(
                    ErrorCode.INPUT_UNAVAILABLE,
                    f"input field '{ref.port}' is absent",
                    path=f"nodes.{node_id}.inputs.{name}",
                )
            continue
        produced = outputs.get(ref.source)
        if produced is None:
            if ref.optional:
                continue
            raise error(
                ErrorCode.INPUT_UNAVAILABLE,
                f"'{text}' has no committed value this round",
                path=f"nodes.{node_id}.inputs.{name}",
                expected=f"'{ref.source}' to complete before '{node_id}'",
            )
        record = ctx.load_record(produced["digest"])
        if ref.port in record:
            values[name] = record[ref.port]
        elif not ref.optional:
            raise error(
                ErrorCode.INPUT_UNAVAILABLE,
                f"'{text}' is missing from the committed outputs",
                path=f"nodes.{node_id}.inputs.{name}",
            )
    return values


def begin(writer: StepWriter, site: Mapping[str, Any], max_visits: int | None) -> bool:
    """Journal the activation becoming active; False if it may not run.

    An action attempt dispatched by the step that scheduled it is already
    journaled as started (see :meth:`StepWriter.dispatch`).
    """
    if site.get("started"):
        return True
    node = writer.node
    visit = int(site.get("visit", site["activation"]))
    if max_visits is not None and visit > max_visits:
        writer.fail_delivery(
            ErrorCode.MAX_VISITS_EXCEEDED,
            f"node '{node}' would run a {visit}th time; max_visits is {max_visits}",
        )
        return False
    writer.journal_start(node, site)
    return True


def commit_outputs(
    writer: StepWriter,
    site: Mapping[str, Any],
    output: Mapping[str, Any],
    *,
    successors: list[str],
    actor: Mapping[str, str] | None = None,
) -> None:
    """Apply validated outputs and schedule successors (custody already accepted)."""
    node = writer.node
    activation = int(site["activation"])
    attempt = int(site.get("attempt", 1))
    digest = writer.record(dict(output))
    step = int(site.get("step", 0))
    writer.put("outputs", node, {"activation": activation, "digest": digest, "step": step})
    writer.put("pending", node, None)
    writer.event(
        node,
        activation,
        Transition.WORK_COMPLETED,
        NodeState.ACTIVE,
        NodeState.COMPLETED,
        attempt=attempt,
        refs=[{"kind": "output", "id": f"{node}#{activation}", "digest": digest}],
        actor=actor,
    )
    for succ in successors:
        writer.schedule(succ, (node, activation))


def fail_node(
    writer: StepWriter,
    site: Mapping[str, Any],
    code: ErrorCode | str,
    message: str,
    on_failure: str | None,
    *,
    actor: Mapping[str, str] | None = None,
) -> None:
    """A non-retryable failure: follow ``on_failure`` or fail the delivery closed."""
    node = writer.node
    activation = int(site["activation"])
    writer.put("pending", node, None)
    writer.event(
        node,
        activation,
        Transition.WORK_FAILED,
        NodeState.ACTIVE,
        NodeState.FAILED,
        attempt=int(site.get("attempt", 1)),
        error={"code": str(code), "message": message},
        actor=actor,
    )
    if on_failure is not None:
        writer.schedule(on_failure, (node, activation))
    else:
        writer.fail_delivery(code, f"node '{node}' failed: {message}")


def successors_of(node_id: str, node: Any, output: Mapping[str, Any]) -> list[str]:
    """The declared successor chosen by this step."""
    if node.routes is not None:
        return [route_target(node_id, node.routes, output)]
    return [node.next] if node.next is not None else []
