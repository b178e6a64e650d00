"""The flow nodes: operations, parallel selections, exact-subset barriers, terminals.

Selection and barrier are the Host's own rules, not the substrate's joins: a
parallel node records the selected set when its selection commits (a new
round); each selected branch's completion is marked; the barrier fires
exactly when the marks of this round equal the selection, once per round.
A terminal ends the delivery and stops whatever still runs beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts import (
    AdmittedDelivery,
    BarrierNode,
    ErrorCode,
    ExecsysError,
    NodeState,
    OperationNode,
    ParallelNode,
    Reference,
    TerminalNode,
    Transition,
    error,
)
from contracts._status import FINISHED, DeliveryStatus
from host._context import StepWriter
from host._operations import OperationContext
from host._selection import check_selection
from host._step import begin, commit_outputs, fail_node, materialize, successors_of
from host._validate import validate_outputs


def abandon(writer: StepWriter, state: Mapping[str, Any]) -> None:
    """An attempt started for a delivery that has since ended never runs: record that."""
    site = (state.get("pending") or {}).get(writer.node)
    ended = (state.get("run") or {}).get("status") in FINISHED
    if site is None or not site.get("started") or not ended:
        return
    writer.put("pending", writer.node, None)
    writer.event(
        writer.node,
        int(site["activation"]),
        Transition.WORK_FAILED,
        NodeState.ACTIVE,
        NodeState.FAILED,
        attempt=int(site.get("attempt", 1)),
        error={
            "code": ErrorCode.SIBLING_STOPPED.value,
            "message": "the delivery ended before this attempt ran",
        },
    )


def operation(writer: StepWriter, node_id: str, node: OperationNode, site: dict[str, Any]) -> None:
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


def parallel(writer: StepWriter, node_id: str, node: ParallelNode, site: dict[str, Any]) -> None:
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
        Transition.WORK_COMPLETED,
        NodeState.ACTIVE,
        NodeState.COMPLETED,
        attempt=1,
        refs=[{"kind": "selection", "id": f"{node_id}#{activation}", "digest": digest}],
    )
    for branch in selected:
        writer.schedule(branch, (node_id, activation))


def barrier(writer: StepWriter, node_id: str, node: BarrierNode) -> None:
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
    writer.event(
        node_id,
        activation,
        Transition.WORK_COMPLETED,
        NodeState.ACTIVE,
        NodeState.COMPLETED,
        attempt=1,
    )
    writer.schedule(node.next, (node_id, activation))


def terminal(writer: StepWriter, node_id: str, node: TerminalNode, site: dict[str, Any]) -> None:
    if not begin(writer, site, node.max_visits):
        return
    activation = int(site["activation"])
    writer.put("pending", node_id, None)
    writer.event(
        node_id,
        activation,
        Transition.WORK_COMPLETED,
        NodeState.ACTIVE,
        NodeState.COMPLETED,
        attempt=1,
    )
    status = DeliveryStatus.COMPLETED if node.outcome == "succeeded" else DeliveryStatus.FAILED
    writer.status(status, outcome=node.outcome, message=f"reached terminal '{node_id}'")
    # Anything still running in this super-step is stopped and recorded as such.
    writer.ctx.stop.set()


def unfired_barriers(delivery: AdmittedDelivery, values: dict[str, Any]) -> list[str]:
    """Barriers of rounds still open in ``values``: woken again, they fire if complete."""
    found = []
    for parallel, info in (values.get("regions") or {}).items():
        node = delivery.graph.nodes[parallel]
        if not info.get("fired") and isinstance(node, ParallelNode):
            found.append(node.barrier)
    return found
