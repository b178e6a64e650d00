"""Queued work: a runner claims a ``queued`` delivery and drives it to its next stop.

A claim is the delivery's lease plus, in one fenced transaction under it, the
move from ``queued`` to ``running``: of runners racing for one delivery the
lease admits one at a time and only the first finds it still queued. Nothing
else makes a delivery ``queued`` but a submission (or an operator's queued
request), so a runner that starts dispatches nothing no one asked for, and a
delivery whose runner died stays ``running`` (needing a directive), never
picked up on its own.
"""

from __future__ import annotations

from typing import Any

from contracts import AdmittedDelivery, ErrorCode, ExecsysError
from contracts._status import DeliveryStatus, RecoveryDirective, StatusReport
from host import _directives
from host._core import HostCore, first_input
from host._queued import queue_request


async def drive_queued(host: HostCore, delivery_id: str) -> StatusReport | None:
    """Claim ``delivery_id`` and drive it to its next stop; None if it was not ours to take."""
    async with host.lock(delivery_id):
        if not host.leases.is_free(delivery_id):
            return None
        try:
            token = host.leases.acquire(delivery_id)
        except ExecsysError as held:
            if held.code is not ErrorCode.LEASE_HELD:
                raise
            return None
        try:
            with host.leases.transaction(delivery_id) as tx:
                claimed = tx.claim_queued(delivery_id, f"claimed by {host.holder}")
            if not claimed:
                return None
            row = host.store.delivery(delivery_id)
            assert row is not None
            delivery = host.delivery(delivery_id)
            queued = row["detail"].get("queued")
            if queued is None:  # a submission: start the thread as 'run' would
                ctx = host.context(delivery)
                head = str(row["detail"]["queued_head"])
                await host.drive(delivery, first_input(delivery, head, ctx), token, ctx)
            else:
                try:
                    await _perform(host, delivery, token, queued)
                except ExecsysError:
                    _put_back(host, delivery_id, queued)
                    raise
            if delivery_id in host.handed_back:
                _requeue(host, delivery_id)
        finally:
            host.leases.release(delivery_id)
    return host.status(delivery_id)


async def _perform(
    host: HostCore, delivery: AdmittedDelivery, token: int, queued: dict[str, Any]
) -> None:
    """Perform a queued request under the runner's ``token``."""
    op, request = queued["op"], queued["request"]
    if op == "recover":
        await _directives.apply(host, delivery, token, request, queued["was"]["status"])
        return
    service: Any = host  # the WorkflowHost that builds the checked inputs
    if op == "answer":
        wake = await service.answer_wake(
            delivery, request["correlation"], request["response"], request["actor"]
        )
    else:
        wake = await service.resolve_wake(
            delivery, request["node"], request["actor"], request["role"], request["result"]
        )
    await host.drive(delivery, wake, token)


def _put_back(host: HostCore, delivery_id: str, queued: dict[str, Any]) -> None:
    """A queued request refused before anything ran: the row goes back to where it was."""
    row = host.store.delivery(delivery_id)
    if row is None or row["status"] != DeliveryStatus.RUNNING.value:
        return  # the drive itself moved it (to intervention, say): that stands
    if row["detail"].get("queued") != queued:
        return
    was = queued["was"]
    detail = {k: v for k, v in row["detail"].items() if k != "queued"}
    detail["message"] = f"queued {queued['op']} was refused; " + str(was.get("message") or "")
    with host.leases.transaction(delivery_id) as tx:
        tx.set_status(delivery_id, was["status"], was["outcome"], detail, None)


def _requeue(host: HostCore, delivery_id: str) -> None:
    """A delivery handed back by this draining runner: queue a continue for the next one."""
    row = host.store.delivery(delivery_id)
    if row is None or row["status"] != DeliveryStatus.STOPPED.value:
        return  # something else ended the drive (a failure, a terminal): that stands
    request = _directives.directive_request(
        RecoveryDirective.CONTINUE, f"runner {host.holder}", "handed back: its runner shut down"
    )
    queue_request(host, delivery_id, "recover", request)
