"""Cancellation: the delivery ends as ``cancelled``, and its journal says who ended what.

A cancel first stops the delivery (interrupting an active turn at its next safe
boundary). Then, in one checkpoint transaction, every activation still open in
the journal is ended by the operator: an active attempt fails with
``DELIVERY_CANCELLED``; a blocked one (waiting for an answer, a resolution or a
directive) is cleared and then fails the same way. Pending questions become
stale, waits are withdrawn, and the run status becomes ``cancelled``, which
nothing can continue.
"""

from __future__ import annotations

from typing import Any

from contracts import ErrorCode, NodeState, Transition, error
from contracts._status import ENDED, DeliveryStatus, StatusReport
from host._context import StepWriter
from host._core import HostCore
from host._outbox import OutboxItem
from host._stop import stop
from host._stop_requests import clear_stop


async def cancel(host: HostCore, delivery_id: str, actor: str, reason: str) -> StatusReport:
    """Stop the delivery and end it as ``cancelled``; see the module docstring."""
    report = host.status(delivery_id)
    if report.status not in ENDED and report.status is not DeliveryStatus.STOPPED:
        report = await stop(host, delivery_id, actor, 60.0, reason)
    if report.status in ENDED:
        raise error(
            ErrorCode.DIRECTIVE_NOT_APPLICABLE,
            f"the delivery is {report.status.value}",
            path=delivery_id,
            expected="a delivery that has not ended",
        )
    if report.status is DeliveryStatus.RUNNING:
        raise error(
            ErrorCode.LEASE_HELD,
            "the delivery did not stop in time",
            path=delivery_id,
            expected="its runner to reach a safe boundary; try again",
        )
    message = f"cancelled by {actor}" + (f": {reason}" if reason else "")
    async with host.lock(delivery_id):
        delivery = host.delivery(delivery_id)
        token = host.leases.acquire(delivery_id, wait_s=5.0)
        try:
            if host.store.latest_checkpoint(delivery_id) is None:
                _cancel_row(host, delivery_id, message)
            else:
                await _journal_cancellation(host, delivery, token, actor, reason, message)
            clear_stop(host.leases, delivery_id)
        finally:
            host.leases.release(delivery_id)
    return host.status(delivery_id)


def _cancel_row(host: HostCore, delivery_id: str, message: str) -> None:
    """No checkpoint yet (killed before its first step): nothing ran, only the status moves."""
    row = host.store.delivery(delivery_id)
    assert row is not None
    with host.leases.transaction(delivery_id) as tx:
        tx.set_status(
            delivery_id,
            DeliveryStatus.CANCELLED.value,
            "CANCELLED",
            {**row["detail"], "message": message},
            None,
        )


async def _journal_cancellation(
    host: HostCore, delivery: Any, token: int, actor: str, reason: str, message: str
) -> None:
    did = delivery.delivery_id
    host.journals.drive(delivery)
    try:
        projection = host.journals.journal(did).projection()
        values = await host.values(delivery)
        ctx = host.context(delivery)
        operator = {"id": actor, "kind": "human"}
        rationale = f"cancel: {reason}"
        outbox: list[OutboxItem] = []
        for (node, number), view in sorted(projection.activations.items()):
            state = view.state.value
            if state not in {"active", "blocked"}:
                continue
            writer = StepWriter(ctx, values, node)
            attempt = len(view.attempts)
            if state == "blocked":
                writer.event(
                    node,
                    number,
                    Transition.BLOCK_CLEARED,
                    NodeState.BLOCKED,
                    NodeState.ACTIVE,
                    attempt=attempt,
                    actor=operator,
                    rationale=rationale,
                    request=f"{node}/{number}/cancel-clear/{attempt}",
                )
            writer.event(
                node,
                number,
                Transition.WORK_FAILED,
                NodeState.ACTIVE,
                NodeState.FAILED,
                attempt=attempt,
                actor=operator,
                error={"code": ErrorCode.DELIVERY_CANCELLED.value, "message": message},
                rationale=rationale,
                request=f"{node}/{number}/cancel/{attempt}",
            )
            outbox.extend(writer.outbox)
        update: dict[str, Any] = {
            channel: {node: None for node in values.get(channel) or {}}
            for channel in ("pending", "suspensions", "waits", "halted")
        }
        update["correlations"] = {
            c: "stale"
            for c, state in (values.get("correlations") or {}).items()
            if state == "pending"
        }
        update["outbox"] = outbox
        update["run"] = {
            "status": DeliveryStatus.CANCELLED.value,
            "outcome": "CANCELLED",
            "message": message,
        }
        await host.substrate.update(delivery, update, token)
    except Exception:
        host.journals.forget(did)
        raise
    finally:
        host.journals.release(did)
