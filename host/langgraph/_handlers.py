"""Node handlers: one super-step of one control-graph node.

Every handler follows the same shape: read the scheduled site from committed
state, do the node's work, and return a ``Command`` whose update is the whole
effect of the step (state, journal drafts, records) and whose ``goto`` names
the successors it scheduled. Nothing a handler does is visible to anyone
until the checkpoint of its super-step commits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.types import Command

from contracts import (
    ActionNode,
    BarrierNode,
    ErrorCode,
    ExecsysError,
    OperationNode,
    ParallelNode,
    Reference,
    TerminalNode,
    WaitNode,
    error,
)
from host._operations import OperationContext
from host._selection import check_selection
from host._validate import route_target, validate_outputs
from host.langgraph._action import run_action_turn
from host.langgraph._context import DeliveryContext, StepWriter

_STOPPED = {"completed", "failed", "cancelled", "stopped", "intervention", "retired"}


def finish(writer: StepWriter) -> Command[Any]:
    """Turn a writer into the step's Command."""
    update: dict[str, Any] = dict(writer.updates)
    if writer.outbox:
        update["outbox"] = writer.outbox
    return Command(update=update, goto=list(writer.goto))


def is_halted(state: Mapping[str, Any]) -> bool:
    """Whether the delivery no longer runs (terminal, stopped or in intervention)."""
    return (state.get("run") or {}).get("status") in _STOPPED


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
        "work-completed",
        "active",
        "completed",
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
        "work-failed",
        "active",
        "failed",
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


async def handle(node_id: str, state: Mapping[str, Any], ctx: DeliveryContext, step: int) -> Any:
    """Run one super-step of ``node_id``."""
    writer = StepWriter(ctx, state, node_id)
    node = ctx.info.graph.nodes[node_id]
    wake = (state.get("wake") or {}).get(node_id)
    if wake is not None:
        writer.put("wake", node_id, None)
    if is_halted(state):
        _abandon(writer, state)
        return finish(writer)
    if ctx.stop_reason == "stop":
        # An operator's stop arrived between steps: nothing starts; whatever was
        # scheduled stays scheduled for 'recover continue'. An attempt already
        # journaled as started is halted, with the operator's name and reason.
        site = (state.get("pending") or {}).get(node_id)
        if site is not None and site.get("started"):
            writer.stopped_by_operator(f"before '{node_id}' ran")
        else:
            writer.status(
                "stopped", outcome=ErrorCode.STOP_REQUESTED.value, message="stopped by an operator"
            )
        return finish(writer)
    if isinstance(node, BarrierNode):
        _barrier(writer, node_id, node)
        return finish(writer)
    site = (state.get("pending") or {}).get(node_id)
    if site is None:
        return finish(writer)  # a trigger with nothing scheduled: nothing to do
    site = {**site, "step": step}
    if isinstance(node, ActionNode):
        await run_action_turn(writer, node_id, node, site, wake)
    elif isinstance(node, OperationNode):
        _operation(writer, node_id, node, site)
    elif isinstance(node, ParallelNode):
        _parallel(writer, node_id, node, site)
    elif isinstance(node, WaitNode):
        from host.langgraph._wait import run_wait

        run_wait(writer, node_id, node, site, wake)
    elif isinstance(node, TerminalNode):
        _terminal(writer, node_id, node, site)
    return finish(writer)


def _abandon(writer: StepWriter, state: Mapping[str, Any]) -> None:
    """An attempt started for a delivery that has since ended never runs: record that."""
    site = (state.get("pending") or {}).get(writer.node)
    ended = (state.get("run") or {}).get("status") in {"completed", "failed", "cancelled"}
    if site is None or not site.get("started") or not ended:
        return
    writer.put("pending", writer.node, None)
    writer.event(
        writer.node,
        int(site["activation"]),
        "work-failed",
        "active",
        "failed",
        attempt=int(site.get("attempt", 1)),
        error={
            "code": ErrorCode.SIBLING_STOPPED.value,
            "message": "the delivery ended before this attempt ran",
        },
    )


def _operation(writer: StepWriter, node_id: str, node: OperationNode, site: dict[str, Any]) -> None:
    if not begin(writer, site, node.max_visits):
        return
    try:
        inputs = materialize(writer.ctx, writer.state, node_id, node.inputs)
        context = OperationContext(
            delivery=writer.ctx.delivery_id,
            node=node_id,
            activation=int(site["activation"]),
            visits=dict(writer.state.get("visits") or {}),
        )
        raw = writer.ctx.operations[node.operation](inputs, context)
        output = validate_outputs(node_id, node.outputs, raw)
        successors = successors_of(node_id, node, output)
    except ExecsysError as exc:
        fail_node(writer, site, exc.code, exc.message, node.on_failure)
        return
    except Exception as exc:  # an operation bug is a failure of that node, not of the Host
        fail_node(
            writer,
            site,
            ErrorCode.OPERATION_FAILED,
            f"{type(exc).__name__}: {exc}",
            node.on_failure,
        )
        return
    commit_outputs(writer, site, output, successors=successors)


def _parallel(writer: StepWriter, node_id: str, node: ParallelNode, site: dict[str, Any]) -> None:
    if not begin(writer, site, node.max_visits):
        return
    activation = int(site["activation"])
    value = None
    if node.select is not None:
        ref = Reference.parse(node.select)
        produced = (writer.state.get("outputs") or {}).get(ref.source)
        try:
            if produced is None:
                # A selection from a round that has ended was cleared with its round.
                raise error(
                    ErrorCode.SELECTION_STALE,
                    f"selection source '{node.select}' has no value this round",
                    path=f"nodes.{node_id}.select",
                    expected=f"'{ref.source}' to run in this round before '{node_id}'",
                )
            value = writer.ctx.load_record(produced["digest"]).get(ref.port)
        except ExecsysError as exc:
            fail_node(writer, site, exc.code, exc.message, None)
            return
    try:
        selected = check_selection(node_id, node, value)
    except ExecsysError as exc:
        fail_node(writer, site, exc.code, exc.message, None)
        return
    previous = writer.current("regions", node_id) or {}
    round_no = int(previous.get("round", 0)) + 1
    # A new round: what the branches produced in earlier rounds is no longer current.
    for region in {r for r in writer.ctx.info.regions.values() if r.parallel == node_id}:
        for member in region.nodes:
            if member in (writer.state.get("outputs") or {}):
                writer.put("outputs", member, None)
    writer.put(
        "regions",
        node_id,
        {
            "round": round_no,
            "selected": selected,
            "fired": False,
            "activation": activation,
            "step": int(site["step"]),
        },
    )
    digest = writer.record({"selected": selected, "round": round_no})
    writer.put("pending", node_id, None)
    writer.event(
        node_id,
        activation,
        "work-completed",
        "active",
        "completed",
        attempt=1,
        refs=[{"kind": "selection", "id": f"{node_id}#{activation}", "digest": digest}],
    )
    for branch in selected:
        writer.schedule(branch, (node_id, activation))


def _barrier(writer: StepWriter, node_id: str, node: BarrierNode) -> None:
    parallel = next(
        pid
        for pid, n in writer.ctx.info.graph.nodes.items()
        if isinstance(n, ParallelNode) and n.barrier == node_id
    )
    info = writer.current("regions", parallel) or {}
    if not info or info.get("fired"):
        return
    round_no = info["round"]
    marks = writer.state.get("marks") or {}
    arrived = [b for b in info["selected"] if marks.get(f"{parallel}/{b}") == round_no]
    if len(arrived) != len(info["selected"]):
        return  # not every selected branch is here yet; a later arrival re-triggers us
    writer.put("regions", parallel, {**info, "fired": True})
    activation, visit = writer.next_activation(node_id)
    tails = [marks.get(f"{parallel}/{b}#tail") for b in info["selected"]]
    site = {
        "activation": activation,
        "visit": visit,
        "attempt": 1,
        "predecessors": [t for t in tails if t],
    }
    if not begin(writer, site, node.max_visits):
        return
    writer.event(node_id, activation, "work-completed", "active", "completed", attempt=1)
    writer.schedule(node.next, (node_id, activation))


def _terminal(writer: StepWriter, node_id: str, node: TerminalNode, site: dict[str, Any]) -> None:
    if not begin(writer, site, node.max_visits):
        return
    activation = int(site["activation"])
    writer.put("pending", node_id, None)
    writer.event(node_id, activation, "work-completed", "active", "completed", attempt=1)
    status = "completed" if node.outcome == "succeeded" else "failed"
    writer.status(status, outcome=node.outcome, message=f"reached terminal '{node_id}'")
    # Anything still running in this super-step is stopped and recorded as such.
    writer.ctx.stop.set()
