"""Recovery directives: continue, intervene, restart-from-savepoint.

Every directive takes the delivery's lease, so two operators (or an operator
and a runner) never act on one thread at once. ``continue`` re-dispatches
interrupted attempts and wakes what was scheduled; ``intervene`` supplies a
halted node's result or fails it; ``restart-from-savepoint`` is in
:mod:`host._restart`.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, assert_never

from contracts import AdmittedDelivery, DeliveryId, ErrorCode, SavepointId, error
from contracts._status import DeliveryStatus, RecoveryDirective, StatusReport
from host._core import HostCore, first_input
from host._flow import unfired_barriers
from host._interrupted import interrupted_attempts, reap_interrupted, redispatch
from host._queued import queue_request
from host._restart import restart_from_savepoint
from host._stop import NOT_STOPPABLE
from host._stop_requests import clear_stop
from host._validate import validate_outputs


async def recover(
    host: HostCore,
    delivery_id: str,
    directive: RecoveryDirective | str,
    *,
    actor: str,
    reason: str,
    node: str | None = None,
    result: Any = None,
    fail: bool = False,
    savepoint: str | None = None,
    queue: bool = False,
) -> StatusReport:
    """Apply one recovery directive: continue, intervene or restart-from-savepoint.

    With ``queue`` the directive is recorded (the delivery becomes ``queued``)
    and the runner that claims it applies it, as :func:`apply`.
    """
    async with host.lock(delivery_id):
        delivery = host.delivery(delivery_id)
        token = host.leases.acquire(delivery_id, wait_s=5.0)
        try:
            kind = _kind(directive)
            status = host.status(delivery_id).status
            if status is DeliveryStatus.QUEUED or (queue and status in NOT_STOPPABLE):
                raise error(
                    ErrorCode.DIRECTIVE_NOT_APPLICABLE,
                    f"the delivery is {status.value}",
                    path=delivery_id,
                    expected="a delivery that has not ended and is not queued",
                )
            request = directive_request(kind, actor, reason, node, result, fail, savepoint)
            if queue:
                queue_request(host, delivery_id, "recover", request)
            else:
                await apply(host, delivery, token, request)
        finally:
            host.leases.release(delivery_id)
    return host.status(delivery_id)


def directive_request(
    kind: RecoveryDirective,
    actor: str,
    reason: str,
    node: str | None = None,
    result: Any = None,
    fail: bool = False,
    savepoint: str | None = None,
) -> dict[str, Any]:
    """A directive as :func:`apply` takes it (and as a queued ``recover`` records it)."""
    return {
        "directive": kind.value,
        "actor": actor,
        "reason": reason,
        "node": node,
        "result": result,
        "fail": fail,
        "savepoint": savepoint,
    }


async def apply(
    host: HostCore,
    delivery: AdmittedDelivery,
    token: int,
    request: dict[str, Any],
    was: str | None = None,
) -> None:
    """Apply a directive under ``token``; ``was`` is the status it was queued from."""
    kind, actor, reason = _kind(request["directive"]), request["actor"], request["reason"]
    if kind is RecoveryDirective.CONTINUE:
        await _continue(host, delivery, token, actor, reason, was)
    elif kind is RecoveryDirective.INTERVENE:
        node, result, fail = request["node"], request["result"], request["fail"]
        await _intervene(host, delivery, token, actor, reason, node, result, fail)
    elif kind is RecoveryDirective.RESTART_FROM_SAVEPOINT:
        savepoint = request["savepoint"]
        await restart_from_savepoint(host, delivery, token, actor, reason, savepoint)
    else:
        assert_never(kind)


def _kind(directive: RecoveryDirective | str) -> RecoveryDirective:
    try:
        return RecoveryDirective(directive)
    except ValueError:
        raise error(
            ErrorCode.USAGE,
            f"unknown directive {directive!r}",
            expected=" | ".join(kind.value for kind in RecoveryDirective),
        ) from None


def _directive(kind: str, actor: str, reason: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "actor": actor, "reason": reason, "id": uuid.uuid4().hex, **extra}


async def _reconcile_custody(
    host: HostCore, delivery: AdmittedDelivery, values: dict[str, Any]
) -> None:
    """Bring custody back to exactly the savepoint the checkpoint embodies, or refuse.

    Always restored, even when custody's head already names that savepoint: an
    attempt killed mid-turn may have written into the workspace without any
    record moving, and what it wrote must not reach the next savepoint.
    """
    wanted = (values.get("savepoint") or {}).get("head")
    if wanted is None:
        return
    await _restore_verified(host, delivery.delivery_id, wanted)


async def _restore_verified(host: HostCore, delivery_id: str, savepoint: str) -> None:
    restored = await asyncio.to_thread(
        host.custody.restore, DeliveryId(delivery_id), SavepointId(savepoint)
    )
    if not restored.confirmed:
        message = f"custody could not restore savepoint {savepoint}: " + ", ".join(
            restored.differences[:3]
        )
        host.mark_intervention(delivery_id, message)
        raise error(
            ErrorCode.CUSTODY_RESTORE_UNCERTAIN,
            message,
            path=delivery_id,
            expected="a confirmed restore before work continues (the delivery is in intervention)",
        )


async def _continue(
    host: HostCore,
    delivery: AdmittedDelivery,
    token: int,
    actor: str,
    reason: str,
    was: str | None = None,
) -> None:
    did = delivery.delivery_id
    row = host.store.delivery(did)
    assert row is not None
    if row["status"] in NOT_STOPPABLE:
        raise error(
            ErrorCode.DIRECTIVE_NOT_APPLICABLE,
            f"the delivery is {row['status']}",
            path=did,
            expected="a delivery that has not ended",
        )
    directive = _directive("continue", actor, reason)
    values: dict[str, Any] = {}
    tasks: tuple[str, ...] = ()
    if host.store.latest_checkpoint(did) is not None:
        snapshot = await host.snapshot(delivery)
        values, tasks = snapshot.values, snapshot.tasks
    if not values.get("run"):
        # Killed before its first state committed (LangGraph's first checkpoint holds
        # no channel values yet): start the thread again, from the workspace exactly
        # as custody opened it.
        head = await asyncio.to_thread(host.custody.open, did, None)
        await _restore_verified(host, did, head)
        clear_stop(host.leases, did)
        ctx = host.context(delivery)
        await host.drive(delivery, first_input(delivery, head, ctx), token, ctx)
        return
    attempts = interrupted_attempts(delivery, values)
    await reap_interrupted(host, delivery, attempts)
    await _reconcile_custody(host, delivery, values)
    clear_stop(host.leases, did)
    wake: dict[str, Any] = {}
    halted = values.get("halted") or {}
    for node in halted:
        wake[node] = {"directive": directive}
    quiet = set(values.get("suspensions") or {}) | set(values.get("waits") or {})
    # A wake already committed (an answer, a resolution) is handed over again as it is.
    woken = dict(values.get("wake") or {})
    for node in [*(values.get("pending") or {}), *tasks]:
        if node in delivery.graph.nodes and node not in quiet and node not in halted:
            wake[node] = woken.get(node, {})  # scheduled, or interrupted mid-step: run it now
    for node, value in woken.items():
        wake.setdefault(node, value)
    for barrier in unfired_barriers(delivery, values):
        wake[barrier] = {}
    status = was or row["status"]
    if not wake and not woken and status == DeliveryStatus.INTERVENTION:
        raise error(
            ErrorCode.DIRECTIVE_NOT_APPLICABLE,
            "nothing is blocked or scheduled to continue",
            path=did,
            expected="'intervene' or 'restart-from-savepoint'",
        )
    ctx = host.context(delivery)
    pending, outbox = redispatch(ctx, values, attempts, directive)
    first: dict[str, Any] = {
        "run": {
            "status": "running",
            "outcome": "",
            "message": f"continued by {actor}: {reason}",
        },
        "wake": wake,
    }
    if pending:
        first["pending"] = pending
        first["outbox"] = outbox
    await host.drive(delivery, first, token, ctx)


async def _intervene(
    host: HostCore,
    delivery: AdmittedDelivery,
    token: int,
    actor: str,
    reason: str,
    node: str | None,
    result: Any,
    fail: bool,
) -> None:
    did = delivery.delivery_id
    values = await host.values(delivery)
    halted = values.get("halted") or {}
    if node is None or node not in halted:
        raise error(
            ErrorCode.DIRECTIVE_NOT_APPLICABLE,
            f"node {node!r} is not blocked waiting for a directive",
            path=node or did,
            expected="one of " + ", ".join(sorted(halted)) if halted else "a halted node",
        )
    if (result is None) == (not fail):
        raise error(ErrorCode.USAGE, "intervene needs exactly one of --result or --fail", path=node)
    if not fail:
        # A result must be valid before anything moves: a refusal leaves the delivery as is.
        spec = delivery.graph.nodes[node]
        validate_outputs(node, getattr(spec, "outputs", {}), result)
    await _reconcile_custody(host, delivery, values)
    clear_stop(host.leases, did)
    kind = "intervene-fail" if fail else "intervene-result"
    directive = _directive(kind, actor, reason, result=result)
    await host.drive(
        delivery,
        {
            "run": {"status": "running", "outcome": "", "message": f"{kind} by {actor}"},
            "wake": {node: {"directive": directive}},
        },
        token,
    )
