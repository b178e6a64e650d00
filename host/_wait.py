"""A workflow wait: block until admitted actors resolve it with a valid result.

The Host's ``resolve`` operation has already checked the result against the
wait's schema and the actor's role against the delivery's authority policy;
this handler journals each approval and completes the wait once the declared
number of approvals is reached.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts import ExecsysError, NodeState, Transition, WaitNode
from host._context import StepWriter
from host._step import begin, fail_node, successors_of
from host._validate import validate_outputs


def run_wait(
    writer: StepWriter,
    node_id: str,
    node: WaitNode,
    site: dict[str, Any],
    wake: Mapping[str, Any] | None,
) -> None:
    """Open the wait on first arrival; record an approval when woken with one."""
    activation = int(site["activation"])
    waiting = (writer.state.get("waits") or {}).get(node_id)
    if waiting is None:
        if not begin(writer, site, node.max_visits):
            return
        writer.put(
            "waits",
            node_id,
            {
                "activation": activation,
                "kind": node.wait,
                "approvals": [],
                "needed": node.authority.min_count,
                "roles": list(node.authority.roles),
            },
        )
        writer.event(
            node_id,
            activation,
            Transition.WORK_BLOCKED,
            NodeState.ACTIVE,
            NodeState.BLOCKED,
            attempt=1,
            rationale=f"waiting for {node.wait}",
        )
        return
    approval = (wake or {}).get("approval")
    if approval is None:
        return
    digest = writer.record(
        {"actor": approval["actor"], "role": approval["role"], "result": approval["result"]}
    )
    entry = {
        "actor": approval["actor"],
        "role": approval["role"],
        "record": {
            "kind": "approval",
            "id": f"{node_id}#{activation}.{len(waiting['approvals']) + 1}",
            "digest": digest,
        },
    }
    approvals = [*waiting["approvals"], entry]
    human = {"id": approval["actor"], "kind": "human", "role": approval["role"]}
    writer.event(
        node_id,
        activation,
        Transition.BLOCK_CLEARED,
        NodeState.BLOCKED,
        NodeState.ACTIVE,
        attempt=1,
        actor=human,
        rationale=f"{node.wait} by {approval['actor']}",
        request=f"{node_id}/{activation}/approval/{len(approvals)}",
    )
    if len(approvals) < node.authority.min_count:
        writer.put(
            "waits", node_id, {**waiting, "approvals": approvals, "result": approval["result"]}
        )
        writer.event(
            node_id,
            activation,
            Transition.WORK_BLOCKED,
            NodeState.ACTIVE,
            NodeState.BLOCKED,
            attempt=1,
            actor=human,
            request=f"{node_id}/{activation}/reblock/{len(approvals)}",
            rationale=f"{len(approvals)} of {node.authority.min_count} approvals",
        )
        return
    writer.put("waits", node_id, None)
    writer.put("run", "status", "running")
    result = approval["result"]
    ports = node.result.get("properties", {}) if isinstance(node.result, dict) else {}
    try:
        output = validate_outputs(
            node_id,
            {k: v for k, v in ports.items() if k in result},
            {k: v for k, v in result.items() if k in ports},
        )
        successors = successors_of(node_id, node, output)
    except ExecsysError as exc:
        fail_node(writer, site, exc.code, exc.message, None)
        return
    digest = writer.record(dict(output))
    writer.put(
        "outputs",
        node_id,
        {"activation": activation, "digest": digest, "step": int(site.get("step", 0))},
    )
    writer.put("pending", node_id, None)
    writer.event(
        node_id,
        activation,
        Transition.WORK_COMPLETED,
        NodeState.ACTIVE,
        NodeState.COMPLETED,
        attempt=1,
        actor=human,
        refs=[
            {"kind": "output", "id": f"{node_id}#{activation}", "digest": digest},
            # The conduct record: who resolved the wait, under which roles, with what.
            {
                "kind": "conduct",
                "id": f"{node_id}#{activation}",
                "digest": writer.record({"approvals": approvals, "result": result}),
            },
        ],
        approvals=[
            {"actor": a["actor"], "role": a["role"], "record": a["record"]} for a in approvals
        ],
        request=f"{node_id}/{activation}/resolved",
    )
    for succ in successors:
        writer.schedule(succ, (node_id, activation))
