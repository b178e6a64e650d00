"""One turn of an action node: materialize, invoke, validate, preview, custody, commit.

The order is the commit protocol of ``docs/architecture.md``: an executor's
completion is a proposal; it is validated against the admitted schema, a
complete preview is built, custody validates the capability and the observed
workspace, and only then are the outputs applied and the next savepoint
recorded. Any rejection restores the base savepoint; a restore that cannot be
confirmed puts the delivery in ``intervention``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Mapping
from typing import Any

from contracts import (
    ActionNode,
    Custody,
    CustodyPreview,
    CustodyVerdict,
    DeliveryId,
    ErrorCode,
    ExecsysError,
    ExecutionSite,
    NodeState,
    SavepointId,
    Transition,
    digest_of,
)
from contracts._invocation import Completed, Failed, InvocationRequest, InvocationResult, NeedsInput
from host._context import StepWriter, invocation_id
from host._retry import backoff_s, may_retry
from host._step import begin, commit_outputs, fail_node, materialize, successors_of
from host._validate import validate_outputs

CAPABILITY_TTL_S = 24 * 3600.0


async def run_action_turn(
    writer: StepWriter,
    node_id: str,
    node: ActionNode,
    site: dict[str, Any],
    wake: Mapping[str, Any] | None,
) -> None:
    """Run the scheduled turn of ``node_id`` (first turn, retry or continuation)."""
    ctx = writer.ctx
    activation = int(site["activation"])
    attempt = int(site.get("attempt", 1))
    suspension = (writer.state.get("suspensions") or {}).get(node_id)
    halted = (writer.state.get("halted") or {}).get(node_id)
    session: str | None = None
    response: Any = None
    turn = 1
    if halted is not None:
        directive = (wake or {}).get("directive")
        if directive is None:
            return  # blocked until an operator's directive
        if not _apply_directive(writer, node_id, node, site, directive):
            return
        # continue: the same attempt and turn again (invocation id + turn is the
        # executor's idempotency key); custody was restored to the base savepoint.
        turn = int(site.get("turn", 1))
        session = site.get("session")
        response = site.get("response")
    elif suspension is not None:
        if wake is None or wake.get("correlation") != suspension.get("correlation"):
            return  # still waiting for its own answer
        turn = int(suspension["turn"]) + 1
        session = suspension.get("session")
        response = wake.get("response")
        writer.put("suspensions", node_id, None)
        writer.put(
            "pending",
            node_id,
            {**_site_fields(site), "turn": turn, "session": session, "response": response},
        )
        writer.event(
            node_id,
            activation,
            Transition.BLOCK_CLEARED,
            NodeState.BLOCKED,
            NodeState.ACTIVE,
            attempt=attempt,
            request=f"{node_id}/{activation}/answer/{suspension['correlation']}",
            rationale="action-input answered",
            actor={"id": str(wake["actor"]), "kind": "automation"} if wake.get("actor") else None,
        )
    else:
        if attempt > 1 and node.retry is not None and not site.get("directive"):
            await _sleep_unless_stopped(writer, backoff_s(node.retry, attempt))
        if not begin(writer, site, node.max_visits):
            return
    try:
        inputs = materialize(ctx, writer.state, node_id, node.inputs)
    except ExecsysError as exc:
        fail_node(writer, site, exc.code, exc.message, node.on_failure)
        return
    binding = ctx.delivery.executors.get(node.executor)
    if binding is None:
        fail_node(
            writer,
            site,
            ErrorCode.EXECUTOR_UNBOUND,
            f"executor '{node.executor}' has no binding",
            node.on_failure,
        )
        return
    invocation = invocation_id(ctx.delivery_id, node_id, activation, attempt)
    exec_site = ExecutionSite(
        delivery=ctx.delivery_id,
        node=node_id,
        activation=activation,
        invocation=invocation,
        attempt=attempt,
    )
    # Signing reads the head and computes one HMAC: cheap enough for the event loop.
    capability = ctx.custody.issue(
        exec_site,
        node.workspace,
        tuple(node.paths or ()),
        CAPABILITY_TTL_S,
        protected=tuple(node.protect),
    )
    request = InvocationRequest(
        delivery=ctx.delivery_id,
        node=node_id,
        activation=activation,
        invocation=invocation,
        attempt=attempt,
        turn=turn,
        input=inputs,
        session=session,
        response=response,
    )
    result = await _invoke_unless_stopped(writer, request, binding, capability.token)
    base = capability.claims.base_savepoint
    if result is None:
        if not await _restore_or_intervene(writer, base):
            return
        if ctx.stop_reason == "stop":
            writer.stopped_by_operator(f"during '{node_id}'")
            return
        if ctx.stop_reason == "handback":
            # The runner's grace ran out: the turn was ended and its workspace restored;
            # the next runner's 'continue' runs the same attempt and turn again.
            writer.hand_back(f"during '{node_id}'")
            return
        writer.put("pending", node_id, None)
        writer.event(
            node_id,
            activation,
            Transition.WORK_FAILED,
            NodeState.ACTIVE,
            NodeState.FAILED,
            attempt=attempt,
            error={
                "code": ErrorCode.SIBLING_STOPPED.value,
                "message": "stopped: the delivery reached a terminal or failed elsewhere",
            },
        )
        return
    if isinstance(result, NeedsInput):
        correlation = "c-" + uuid.uuid4().hex
        writer.put(
            "suspensions",
            node_id,
            {
                "correlation": correlation,
                "invocation": invocation,
                "session": result.session,
                "question": result.question,
                "turn": turn,
                "activation": activation,
                "attempt": attempt,
            },
        )
        writer.put("correlations", correlation, "pending")
        writer.event(
            node_id,
            activation,
            Transition.WORK_BLOCKED,
            NodeState.ACTIVE,
            NodeState.BLOCKED,
            attempt=attempt,
            rationale="action-input requested",
            request=f"{node_id}/{activation}/ask/{turn}",
        )
        return
    if isinstance(result, Failed):
        if not await _restore_or_intervene(writer, base):
            return
        if result.unknown_outcome:
            writer.intervention(
                f"node '{node_id}': outcome of the executor turn is unknown "
                f"({result.code.value}: {result.detail})",
                result.code,
            )
            return
        if result.retryable and may_retry(node.retry, attempt):
            writer.event(
                node_id,
                activation,
                Transition.WORK_FAILED,
                NodeState.ACTIVE,
                NodeState.FAILED,
                attempt=attempt,
                error={"code": result.code.value, "message": result.reason},
            )
            retry = {**_site_fields(site), "attempt": attempt + 1}
            retry.pop("started", None)
            writer.put("pending", node_id, writer.dispatch(node_id, retry))
            writer.goto.append(node_id)
            return
        # RETRIES_EXHAUSTED only when retries were allowed and used up; else the cause itself.
        retried = result.retryable and node.retry is not None and node.retry.max_attempts > 1
        code = ErrorCode.RETRIES_EXHAUSTED if retried else result.code
        fail_node(
            writer,
            site,
            code,
            result.reason + (f": {result.detail}" if result.detail else ""),
            node.on_failure,
        )
        return
    await _commit(writer, node_id, node, site, result, capability.token, exec_site, base)


def _site_fields(site: Mapping[str, Any]) -> dict[str, Any]:
    keep = {
        "activation",
        "attempt",
        "turn",
        "predecessors",
        "session",
        "response",
        "halts",
        "started",
    }
    return {k: v for k, v in site.items() if k in keep}


def _apply_directive(
    writer: StepWriter,
    node_id: str,
    node: ActionNode,
    site: dict[str, Any],
    directive: Mapping[str, Any],
) -> bool:
    """Clear the halt under an operator's directive; True if the turn should run again."""
    activation = int(site["activation"])
    attempt = int(site.get("attempt", 1))
    operator = {"id": str(directive["actor"]), "kind": "human"}
    writer.put("halted", node_id, None)
    writer.status("running", message=f"{directive['kind']} by {directive['actor']}")
    writer.event(
        node_id,
        activation,
        Transition.BLOCK_CLEARED,
        NodeState.BLOCKED,
        NodeState.ACTIVE,
        attempt=attempt,
        actor=operator,
        rationale=f"{directive['kind']}: {directive.get('reason', '')}",
        request=f"{node_id}/{activation}/directive/{directive['id']}",
    )
    if directive["kind"] == "intervene-result":
        try:
            output = validate_outputs(node_id, node.outputs, directive.get("result"))
            successors = successors_of(node_id, node, output)
        except ExecsysError as exc:
            fail_node(writer, site, exc.code, exc.message, node.on_failure, actor=operator)
            return False
        commit_outputs(writer, site, output, successors=successors, actor=operator)
        return False
    if directive["kind"] == "intervene-fail":
        fail_node(
            writer,
            site,
            ErrorCode.NODE_FAILED,
            f"marked failed by {directive['actor']}: {directive.get('reason', '')}",
            node.on_failure,
            actor=operator,
        )
        return False
    return True


async def _commit(
    writer: StepWriter,
    node_id: str,
    node: ActionNode,
    site: dict[str, Any],
    result: Completed,
    token: str,
    exec_site: ExecutionSite,
    base: SavepointId,
) -> None:
    ctx = writer.ctx
    try:
        output = validate_outputs(node_id, node.outputs, result.output)
        successors = successors_of(node_id, node, output)
    except ExecsysError as exc:
        if await _restore_or_intervene(writer, base):
            fail_node(writer, site, exc.code, exc.message, node.on_failure)
        return
    preview = CustodyPreview(
        capability=token,
        site=exec_site,
        update_digest=digest_of(
            {
                "node": node_id,
                "activation": site["activation"],
                "outputs": output,
                "successors": successors,
            }
        ),
        artifacts=result.artifacts,
    )
    try:
        # Validation hashes the workspace, and an accepted verdict is advanced right
        # away, before the checkpoint commits: in a worker thread, unless the
        # delivery is alone in its process and its validations are quick.
        started = time.perf_counter()
        if ctx.custody_on_loop():
            verdict, advanced = _validate_and_advance(ctx.custody, preview, ctx.delivery_id)
        else:
            verdict, advanced = await asyncio.to_thread(
                _validate_and_advance, ctx.custody, preview, ctx.delivery_id
            )
        ctx.custody_s = time.perf_counter() - started
    except Exception as exc:  # custody state unknown: never guess
        writer.intervention(f"custody could not validate '{node_id}': {type(exc).__name__}")
        return
    if not verdict.accepted or verdict.savepoint is None:
        if await _restore_or_intervene(writer, base):
            code = verdict.code or ErrorCode.CUSTODY_REJECTED
            where = f" at {verdict.path}" if verdict.path else ""
            fail_node(
                writer, site, code, f"custody refused{where}: {verdict.message}", node.on_failure
            )
        return
    if advanced is not None:
        writer.intervention(f"custody could not advance for '{node_id}': {advanced}")
        return
    writer.put("savepoint", "head", verdict.savepoint)
    commit_outputs(writer, site, output, successors=successors)


def _validate_and_advance(
    custody: Custody, preview: CustodyPreview, delivery: DeliveryId
) -> tuple[CustodyVerdict, str | None]:
    """Validate; if accepted, advance. Returns the verdict and an advance failure, if any."""
    verdict = custody.validate(preview)
    if not verdict.accepted or verdict.savepoint is None:
        return verdict, None
    try:
        custody.advance(delivery, verdict.savepoint)
    except Exception as exc:  # reported as an intervention by the caller
        return verdict, type(exc).__name__
    return verdict, None


async def _restore_or_intervene(writer: StepWriter, savepoint: SavepointId) -> bool:
    """Restore the base savepoint; on doubt, ask for a directive. True if confirmed."""
    ctx = writer.ctx
    try:
        restored = await asyncio.to_thread(ctx.custody.restore, ctx.delivery_id, savepoint)
    except Exception as exc:
        writer.intervention(f"restore of savepoint {savepoint} failed: {type(exc).__name__}")
        return False
    if not restored.confirmed:
        differs = ", ".join(restored.differences[:3])
        writer.intervention(f"restore of savepoint {savepoint} is uncertain: {differs}")
        return False
    return True


async def _sleep_unless_stopped(writer: StepWriter, seconds: float) -> None:
    if seconds <= 0:
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(writer.ctx.stop.wait(), timeout=seconds)


async def _invoke_unless_stopped(
    writer: StepWriter, request: InvocationRequest, binding: Any, token: str
) -> InvocationResult | None:
    """Invoke; return None if the delivery was stopped meanwhile (the turn is cancelled)."""
    ctx = writer.ctx
    if ctx.stop.is_set():
        return None
    workspace = ctx.custody.workspace(ctx.delivery_id)
    call = asyncio.ensure_future(
        ctx.invoker(request, binding, capability=token, workspace=workspace)
    )
    # The stop's future is shared by every turn of the delivery: nothing to cancel here.
    racing: set[asyncio.Future[Any]] = {call, ctx.stop.future()}
    done, _ = await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
    if call in done:
        return _safe_result(call)
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await call
    return None


def _safe_result(call: asyncio.Future[InvocationResult]) -> InvocationResult:
    try:
        return call.result()
    except Exception as exc:  # the invoker must not raise; if it does, the outcome is unknown
        return Failed(
            reason="invoker-raised",
            code=ErrorCode.EXECUTOR_RAISED,
            detail=f"{type(exc).__name__}: {exc}"[:300],
            unknown_outcome=True,
        )
