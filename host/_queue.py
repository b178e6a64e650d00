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

from contracts import ErrorCode, ExecsysError
from contracts._status import StatusReport
from host._core import HostCore, first_input


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
            ctx = host.context(delivery)
            head = str(row["detail"]["queued_head"])
            await host.drive(delivery, first_input(delivery, head, ctx), token, ctx)
        finally:
            host.leases.release(delivery_id)
    return host.status(delivery_id)
