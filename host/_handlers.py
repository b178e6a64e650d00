"""One super-step of one control-graph node: the dispatch by node kind.

Halted deliveries abandon what they started, an operator's stop halts what was
about to run, and every other step goes to its node kind: actions
(:mod:`host._action`), waits (:mod:`host._wait`), and the flow nodes —
operations, parallel selections, barriers and terminals (:mod:`host._flow`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts import (
    ActionNode,
    BarrierNode,
    ErrorCode,
    OperationNode,
    ParallelNode,
    TerminalNode,
    WaitNode,
)
from host._action import run_action_turn
from host._context import DeliveryContext, StepWriter
from host._flow import abandon, barrier, operation, parallel, terminal
from host._step import StepResult, finish, is_halted
from host._wait import run_wait


async def handle(
    node_id: str, state: Mapping[str, Any], ctx: DeliveryContext, step: int
) -> StepResult:
    """Run one super-step of ``node_id``."""
    writer = StepWriter(ctx, state, node_id)
    node = ctx.info.graph.nodes[node_id]
    wake = (state.get("wake") or {}).get(node_id)
    if wake is not None:
        writer.put("wake", node_id, None)
    if is_halted(state):
        abandon(writer, state)
        return finish(writer)
    if ctx.drain and ctx.stop_reason in ("", "handback") and _may_hand_back(state, node_id, wake):
        # The runner shuts down and this node has invoked nothing yet: it is halted
        # (journaled) for the next runner's 'continue'; turns in flight elsewhere
        # finish and commit, or end if the runner's grace has run out.
        writer.hand_back(f"before '{node_id}' ran")
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
        barrier(writer, node_id, node)
        return finish(writer)
    site = (state.get("pending") or {}).get(node_id)
    if site is None:
        return finish(writer)  # a trigger with nothing scheduled: nothing to do
    site = {**site, "step": step}
    if isinstance(node, ActionNode):
        await run_action_turn(writer, node_id, node, site, wake)
    elif isinstance(node, OperationNode):
        operation(writer, node_id, node, site)
    elif isinstance(node, ParallelNode):
        parallel(writer, node_id, node, site)
    elif isinstance(node, WaitNode):
        run_wait(writer, node_id, node, site, wake)
    elif isinstance(node, TerminalNode):
        terminal(writer, node_id, node, site)
    return finish(writer)


def _may_hand_back(state: Mapping[str, Any], node_id: str, wake: Any) -> bool:
    """Whether a draining runner may leave ``node_id`` to another runner.

    A node that is scheduled and has invoked nothing: not one woken by an
    answer, a resolution or a directive (the continuation someone asked for),
    nor an action that already asked a question and waits for its next turn.
    """
    site = (state.get("pending") or {}).get(node_id)
    return wake is None and site is not None and int(site.get("turn", 1)) == 1
