"""The operator's side of the Host: stop, directives, the startup listing, retirement.

Startup never dispatches work: a delivery left ``running`` by a runner that
died, one in ``intervention``, a ``stopped`` one, and one whose checkpoint,
journal head and custody savepoint disagree are *listed* with the reason, and
only a directive moves them. Every directive takes the delivery's lease, so
two operators (or an operator and a runner) never act on one thread at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

from contracts import AdmittedDelivery, ErrorCode, ExecsysError, ParallelNode, error
from contracts._status import StatusReport
from host.langgraph._interrupted import interrupted_attempts, reap_interrupted, redispatch
from host.storage import StorageTx

if TYPE_CHECKING:
    from host.langgraph._host import LangGraphHost

_NOT_STOPPABLE = {"completed", "failed", "cancelled", "retired"}
ORPHANED = "its runner is gone (crashed or killed) in the middle of a step"
HUNG = "its runner stopped renewing its lease (hung?) in the middle of a step"


async def stop(
    host: LangGraphHost, delivery_id: str, actor: str, wait_s: float, reason: str = ""
) -> StatusReport:
    """Bring a delivery to ``stopped`` at its next safe boundary."""
    host._delivery(delivery_id)  # refuses unknown and retired deliveries
    report = host.status(delivery_id)
    if report.status.value in _NOT_STOPPABLE:
        raise error(
            ErrorCode.STOP_NOT_APPLICABLE,
            f"the delivery is {report.status.value}",
            path=delivery_id,
            expected="a delivery that has not ended",
        )
    if report.status.value == "stopped":
        return report
    # A request, not a holder's write: whoever holds the lease honours it (unfenced).
    with host.store.transaction() as tx:
        # The actor text holds who and why (JSON); older rows hold the name alone.
        tx.request_stop(delivery_id, time.time(), json.dumps({"actor": actor, "reason": reason}))
    active = host._active.get(delivery_id)
    if active is not None:  # driven by this process: signal it directly
        active.stop_request = {"actor": actor, "reason": reason}
        active.stop_reason = "stop"
        active.stop.set()
        return await _await_stopped(host, delivery_id, wait_s)
    deadline = time.monotonic() + wait_s
    while True:
        # Nobody drives it, or its driver died or stopped renewing: take the lease
        # (the old holder's late writes are fenced) and record the stop.
        stopped = _stop_undriven(host, delivery_id, actor, report.status.value, reason)
        if stopped is not None:
            return stopped
        current = host.status(delivery_id)
        if current.status.value != "running" or time.monotonic() >= deadline:
            return current
        await asyncio.sleep(0.05)


def _stop_undriven(
    host: LangGraphHost, delivery_id: str, actor: str, was: str, reason: str
) -> StatusReport | None:
    """Mark the delivery stopped if its lease can be had now; None if a live holder has it."""
    if not host.leases.is_free(delivery_id):
        return None
    try:
        host.leases.acquire(delivery_id)
    except ExecsysError as held:
        if held.code is not ErrorCode.LEASE_HELD:
            raise
        return None
    try:
        # No executor of ours is running, so nothing to interrupt; the stop is
        # recorded on the delivery and only a directive continues it.
        if host.status(delivery_id).status.value not in _NOT_STOPPABLE | {"stopped"}:
            why = f": {reason}" if reason else ""
            _mark_stopped(host, delivery_id, f"stopped by {actor} while {was}{why}")
    finally:
        host.leases.release(delivery_id)
    return host.status(delivery_id)


def _mark_stopped(host: LangGraphHost, delivery_id: str, message: str) -> None:
    row = host.store.delivery(delivery_id)
    assert row is not None
    detail = {**row["detail"], "message": message, "stopped_from": row["status"]}
    with host.leases.transaction(delivery_id) as tx:
        tx.set_status(delivery_id, "stopped", ErrorCode.STOP_REQUESTED.value, detail, None)
        tx.clear_stop(delivery_id)


async def _await_stopped(host: LangGraphHost, delivery_id: str, wait_s: float) -> StatusReport:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        report = host.status(delivery_id)
        if report.status.value not in {"running"}:
            return report
        await asyncio.sleep(0.05)
    return host.status(delivery_id)


def stop_request(host: LangGraphHost, delivery_id: str) -> dict[str, str] | None:
    """Who asked this delivery to stop and why, if anyone did (checked by its runner)."""
    raw = host.store.stop_request(delivery_id)
    if raw is None:
        return None
    try:
        found = json.loads(raw)
    except (TypeError, ValueError):
        found = None
    if not isinstance(found, dict):
        return {"actor": raw, "reason": ""}
    return {"actor": str(found.get("actor", "")), "reason": str(found.get("reason", ""))}


def clear_stop(host: LangGraphHost, delivery_id: str) -> None:
    """Forget a stop request (it was honoured, or a directive overrides it)."""
    with host.leases.transaction(delivery_id) as tx:
        tx.clear_stop(delivery_id)


def custody_head(host: LangGraphHost, delivery_id: str) -> str | None:
    """Custody's head savepoint, read independently (None if custody has no workspace)."""
    try:
        return str(host.custody.head(delivery_id))  # type: ignore[arg-type]
    except ExecsysError:
        return None


def consistency(host: LangGraphHost, delivery_id: str) -> list[str]:
    """Disagreements between checkpoint, journal and custody, each read on its own."""
    row = host.store.delivery(delivery_id)
    if row is None or row["status"] == "retired":
        return []
    problems: list[str] = []
    detail = row["detail"]
    expected = detail.get("journal") or {}
    head, count = host.store.journal_head(delivery_id)
    if expected and (expected.get("head"), expected.get("events")) != (head, count):
        problems.append(
            f"journal head {head} ({count} events) differs from the checkpoint's "
            f"{expected.get('head')} ({expected.get('events')} events)"
        )
    checkpoint_savepoint = detail.get("savepoint")
    found = custody_head(host, delivery_id)
    if checkpoint_savepoint and found != checkpoint_savepoint:
        problems.append(
            f"custody head {found} differs from the checkpoint's savepoint {checkpoint_savepoint}"
        )
    return problems


def needs_directive(host: LangGraphHost) -> list[dict[str, Any]]:
    """Deliveries that only a directive can move, and why (startup dispatches nothing)."""
    listed = []
    for row in host.store.deliveries():
        delivery, status = row["delivery"], row["status"]
        reasons = []
        lease = host.leases.state(delivery)["state"] if status == "running" else "held"
        if lease == "expired":
            reasons.append(HUNG)
        elif lease != "held":
            reasons.append(ORPHANED)
        if status == "intervention":
            stored = host.store.delivery(delivery)
            detail = stored["detail"] if stored is not None else {}
            reasons.append(detail.get("message") or "intervention required")
        if status == "stopped":
            reasons.append("stopped by an operator")
        if status not in _NOT_STOPPABLE:
            reasons.extend(consistency(host, delivery))
        if reasons:
            listed.append({"delivery": delivery, "status": status, "reasons": reasons})
    return listed


async def recover(
    host: LangGraphHost,
    delivery_id: str,
    directive: str,
    *,
    actor: str,
    reason: str,
    node: str | None = None,
    result: Any = None,
    fail: bool = False,
    savepoint: str | None = None,
) -> StatusReport:
    """Apply one recovery directive: continue, intervene or restart-from-savepoint."""
    async with host._lock(delivery_id):
        delivery = host._delivery(delivery_id)
        token = host.leases.acquire(delivery_id, wait_s=5.0)
        try:
            if directive == "continue":
                await _continue(host, delivery, token, actor, reason)
            elif directive == "intervene":
                await _intervene(host, delivery, token, actor, reason, node, result, fail)
            elif directive == "restart-from-savepoint":
                from host.langgraph._restart import restart_from_savepoint

                await restart_from_savepoint(host, delivery, token, actor, reason, savepoint)
            else:
                raise error(
                    ErrorCode.USAGE,
                    f"unknown directive {directive!r}",
                    expected="continue | restart-from-savepoint | intervene",
                )
        finally:
            host.leases.release(delivery_id)
    return host.status(delivery_id)


def unfired_barriers(delivery: AdmittedDelivery, values: dict[str, Any]) -> list[str]:
    """Barriers of rounds still open in ``values``: woken again, they fire if complete."""
    found = []
    for parallel, info in (values.get("regions") or {}).items():
        node = delivery.graph.nodes[parallel]
        if not info.get("fired") and isinstance(node, ParallelNode):
            found.append(node.barrier)
    return found


def _directive(kind: str, actor: str, reason: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "actor": actor, "reason": reason, "id": uuid.uuid4().hex, **extra}


async def _reconcile_custody(
    host: LangGraphHost, delivery: AdmittedDelivery, values: dict[str, Any]
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


async def _restore_verified(host: LangGraphHost, delivery_id: str, savepoint: str) -> None:
    restored = await asyncio.to_thread(host.custody.restore, delivery_id, savepoint)  # type: ignore[arg-type]
    if not restored.confirmed:
        message = f"custody could not restore savepoint {savepoint}: " + ", ".join(
            restored.differences[:3]
        )
        host._mark_intervention(delivery_id, message)
        raise error(
            ErrorCode.CUSTODY_RESTORE_UNCERTAIN,
            message,
            path=delivery_id,
            expected="a confirmed restore before work continues (the delivery is in intervention)",
        )


async def _continue(
    host: LangGraphHost, delivery: AdmittedDelivery, token: int, actor: str, reason: str
) -> None:
    from host.langgraph._host import first_input

    did = delivery.delivery_id
    row = host.store.delivery(did)
    assert row is not None
    if row["status"] in _NOT_STOPPABLE:
        raise error(
            ErrorCode.DIRECTIVE_NOT_APPLICABLE,
            f"the delivery is {row['status']}",
            path=did,
            expected="a delivery that has not ended",
        )
    directive = _directive("continue", actor, reason)
    values: dict[str, Any] = {}
    tasks: list[str] = []
    if host.store.latest_checkpoint(did) is not None:
        values, tasks = await host._snapshot(delivery)
    if not values.get("run"):
        # Killed before its first state committed (LangGraph's first checkpoint holds
        # no channel values yet): start the thread again, from the workspace exactly
        # as custody opened it.
        head = await asyncio.to_thread(host.custody.open, did, None)
        await _restore_verified(host, did, head)
        clear_stop(host, did)
        ctx = host._context(delivery)
        await host._drive(delivery, first_input(delivery, head, ctx), token, ctx)
        return
    attempts = interrupted_attempts(delivery, values)
    await reap_interrupted(host, delivery, attempts)
    await _reconcile_custody(host, delivery, values)
    clear_stop(host, did)
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
    status = row["status"]
    if not wake and not woken and status == "intervention":
        raise error(
            ErrorCode.DIRECTIVE_NOT_APPLICABLE,
            "nothing is blocked or scheduled to continue",
            path=did,
            expected="'intervene' or 'restart-from-savepoint'",
        )
    ctx = host._context(delivery)
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
    await host._drive(delivery, first, token, ctx)


async def _intervene(
    host: LangGraphHost,
    delivery: AdmittedDelivery,
    token: int,
    actor: str,
    reason: str,
    node: str | None,
    result: Any,
    fail: bool,
) -> None:
    did = delivery.delivery_id
    values, _ = await host._snapshot(delivery)
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
        from host._validate import validate_outputs

        spec = delivery.graph.nodes[node]
        validate_outputs(node, getattr(spec, "outputs", {}), result)
    await _reconcile_custody(host, delivery, values)
    clear_stop(host, did)
    kind = "intervene-fail" if fail else "intervene-result"
    directive = _directive(kind, actor, reason, result=result)
    await host._drive(
        delivery,
        {
            "run": {"status": "running", "outcome": "", "message": f"{kind} by {actor}"},
            "wake": {node: {"directive": directive}},
        },
        token,
    )


async def retire(
    host: LangGraphHost, delivery_id: str, authorization: str, actor: str
) -> dict[str, Any]:
    """Delete the thread's Host-owned records once; keep a durable tombstone fact."""
    if not authorization or len(authorization) > 256 or not authorization.isprintable():
        raise error(
            ErrorCode.USAGE,
            "the authorization id is not a printable token",
            path="--authorization",
            expected="1-256 printable characters",
        )
    # The lease serializes retirement with any directive or runner on this thread;
    # the transaction makes the destructive part happen exactly once.
    host.leases.acquire(delivery_id, wait_s=30.0)
    try:
        return await _retire_locked(host, delivery_id, authorization, actor)
    finally:
        host.leases.release(delivery_id)


async def _retire_locked(
    host: LangGraphHost, delivery_id: str, authorization: str, actor: str
) -> dict[str, Any]:
    with host.leases.transaction(delivery_id) as tx:
        known = tx.retirement(delivery_id)
        if known is not None:
            if known[0] != authorization:
                raise error(
                    ErrorCode.RETIRE_AUTHORIZATION_CONFLICT,
                    "the delivery was retired under another authorization",
                    path=delivery_id,
                    expected="the authorization it was retired with",
                )
            fact, performed = known[1], False
        else:
            fact, performed = _retire_rows(tx, delivery_id, authorization, actor), True
    # Files after the durable fact: a crash here leaves only garbage that a retry
    # with the same authorization removes (custody retirement is idempotent).
    with contextlib.suppress(ExecsysError):
        await asyncio.to_thread(host.custody.retire, delivery_id)  # type: ignore[arg-type]
    return {**fact, "performed": performed}


def _retire_rows(tx: StorageTx, delivery_id: str, authorization: str, actor: str) -> dict[str, Any]:
    from contracts import digest_of

    row = tx.delivery(delivery_id)
    if row is None:
        raise error(ErrorCode.DELIVERY_NOT_FOUND, "no such delivery", path=delivery_id)
    status, digest, graph = row["status"], row["digest"], row["graph_digest"]
    if status not in {"completed", "failed", "cancelled", "stopped"}:
        raise error(
            ErrorCode.RETIRE_NOT_APPLICABLE,
            f"the delivery is {status}",
            path=delivery_id,
            expected="a terminal or stopped delivery",
        )
    head_digest, events = tx.journal_head(delivery_id)
    fact = {
        "delivery": delivery_id,
        "thread": delivery_id,
        "digest": digest,
        "graph": graph,
        "status": status,
        "authorization": authorization,
        "actor": actor,
        "journal": {"head": head_digest, "events": events},
        "retired_at": time.time(),
    }
    fact["fact"] = digest_of({k: v for k, v in fact.items() if k != "retired_at"})
    tx.retire(delivery_id, authorization, fact, status)
    return fact


async def invalidate(
    host: LangGraphHost, delivery_id: str, node: str, *, actor: str, reason: str
) -> StatusReport:
    """Invalidate ``node``'s latest activation and its whole descendant closure.

    Used when a record an activation produced is found wrong after the fact (for
    example a frozen source that changed): the journal keeps the history and
    marks everything that depended on it as no longer current. The events
    commit with a checkpoint, like every other journal write.
    """
    from contracts import digest_of

    async with host._lock(delivery_id):
        delivery = host._delivery(delivery_id)
        token = host.leases.acquire(delivery_id, wait_s=5.0)
        saver, graphs = host.engine()
        graph, _ = graphs.get(delivery.graph)
        try:
            host.journals.drive(delivery)
            projection = host.journals.journal(delivery_id).projection()
            latest = projection.current.get(node)  # type: ignore[call-overload]
            if latest is None:
                raise error(
                    ErrorCode.DIRECTIVE_NOT_APPLICABLE,
                    f"'{node}' never ran",
                    path=node,
                    expected="a node with an activation",
                )
            directive = {
                "directive": "invalidate",
                "node": node,
                "activation": latest,
                "actor": actor,
                "reason": reason,
                "id": uuid.uuid4().hex,
            }
            source = digest_of(directive)
            update = {
                "outbox": [
                    {"type": "record", "digest": source, "value": directive},
                    {
                        "type": "invalidate",
                        "request": f"invalidate/{directive['id']}",
                        "targets": [[node, latest]],
                        "source": {"kind": "directive", "id": directive["id"], "digest": source},
                        "policy": "invalidate-on-drift",
                        "actor": {"id": actor, "kind": "human"},
                        "rationale": reason,
                    },
                ]
            }
            saver.tokens[delivery_id] = token
            await graph.aupdate_state(host._config(delivery), update, as_node=delivery.graph.start)
        except Exception:
            host.journals.forget(delivery_id)
            raise
        finally:
            saver.tokens.pop(delivery_id, None)
            host.journals.release(delivery_id)
            host.leases.release(delivery_id)
    return host.status(delivery_id)
