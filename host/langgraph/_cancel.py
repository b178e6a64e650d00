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

from typing import TYPE_CHECKING, Any

from contracts import ErrorCode, error
from contracts._status import StatusReport
from host.langgraph._context import StepWriter
from host.langgraph._operator import clear_stop, stop

if TYPE_CHECKING:
    from host.langgraph._host import LangGraphHost

_ENDED = {"completed", "failed", "cancelled", "retired"}


async def cancel(host: LangGraphHost, delivery_id: str, actor: str, reason: str) -> StatusReport:
    """Stop the delivery and end it as ``cancelled``; see the module docstring."""
    report = host.status(delivery_id)
    if report.status.value not in _ENDED and report.status.value != "stopped":
        report = await stop(host, delivery_id, actor, 60.0, reason)
    if report.status.value in _ENDED:
        raise error(
            ErrorCode.DIRECTIVE_NOT_APPLICABLE,
            f"the delivery is {report.status.value}",
            path=delivery_id,
            expected="a delivery that has not ended",
        )
    if report.status.value == "running":
        raise error(
            ErrorCode.LEASE_HELD,
            "the delivery did not stop in time",
            path=delivery_id,
            expected="its runner to reach a safe boundary; try again",
        )
    message = f"cancelled by {actor}" + (f": {reason}" if reason else "")
    async with host._lock(delivery_id):
        delivery = host._delivery(delivery_id)
        token = host.leases.acquire(delivery_id, wait_s=5.0)
        try:
            if host.store.latest_checkpoint(delivery_id) is None:
                _cancel_row(host, delivery_id, message)
            else:
                await _journal_cancellation(host, delivery, token, actor, reason, message)
            clear_stop(host, delivery_id)
        finally:
            host.leases.release(delivery_id)
    return host.status(delivery_id)


def _cancel_row(host: LangGraphHost, delivery_id: str, message: str) -> None:
    """No checkpoint yet (killed before its first step): nothing ran, only the status moves."""
    row = host.store.delivery(delivery_id)
    assert row is not None
    with host.leases.transaction(delivery_id) as tx:
        tx.set_status(
            delivery_id, "cancelled", "CANCELLED", {**row["detail"], "message": message}, None
        )


async def _journal_cancellation(
    host: LangGraphHost, delivery: Any, token: int, actor: str, reason: str, message: str
) -> None:
    did = delivery.delivery_id
    saver, graphs = host.engine()
    graph, _ = graphs.get(delivery.graph)
    host.journals.drive(delivery)
    try:
        projection = host.journals.journal(did).projection()
        values = await host._values(delivery)
        ctx = host._context(delivery)
        operator = {"id": actor, "kind": "human"}
        rationale = f"cancel: {reason}"
        outbox: list[dict[str, Any]] = []
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
                    "block-cleared",
                    "blocked",
                    "active",
                    attempt=attempt,
                    actor=operator,
                    rationale=rationale,
                    request=f"{node}/{number}/cancel-clear/{attempt}",
                )
            writer.event(
                node,
                number,
                "work-failed",
                "active",
                "failed",
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
        update["run"] = {"status": "cancelled", "outcome": "CANCELLED", "message": message}
        saver.tokens[did] = token
        await graph.aupdate_state(host._config(delivery), update, as_node=delivery.graph.start)
    except Exception:
        host.journals.forget(did)
        raise
    finally:
        saver.tokens.pop(did, None)
        host.journals.release(did)
