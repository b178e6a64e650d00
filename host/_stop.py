"""The operator's stop: bring a delivery to ``stopped`` at its next safe boundary.

A delivery this process drives is signalled directly; one driven elsewhere
sees the recorded request; one nobody drives (its runner died or hangs) is
marked stopped under a freshly taken lease, which fences the old holder.
"""

from __future__ import annotations

import asyncio
import time

from contracts import ErrorCode, ExecsysError, error
from contracts._status import ENDED, DeliveryStatus, StatusReport
from host._core import HostCore
from host._stop_requests import request_stop

NOT_STOPPABLE = ENDED
"""Statuses a stop (or a continue) no longer applies to."""


async def stop(
    host: HostCore, delivery_id: str, actor: str, wait_s: float, reason: str = ""
) -> StatusReport:
    """Bring a delivery to ``stopped`` at its next safe boundary."""
    host.delivery(delivery_id)  # refuses unknown and retired deliveries
    report = host.status(delivery_id)
    if report.status.value in NOT_STOPPABLE:
        raise error(
            ErrorCode.STOP_NOT_APPLICABLE,
            f"the delivery is {report.status.value}",
            path=delivery_id,
            expected="a delivery that has not ended",
        )
    if report.status is DeliveryStatus.STOPPED:
        return report
    request_stop(host.store, delivery_id, actor, reason)
    active = host.active.get(delivery_id)
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
        if current.status is not DeliveryStatus.RUNNING or time.monotonic() >= deadline:
            return current
        await asyncio.sleep(0.05)


def _stop_undriven(
    host: HostCore, delivery_id: str, actor: str, was: str, reason: str
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
        if host.status(delivery_id).status.value not in NOT_STOPPABLE | {DeliveryStatus.STOPPED}:
            why = f": {reason}" if reason else ""
            _mark_stopped(host, delivery_id, f"stopped by {actor} while {was}{why}")
    finally:
        host.leases.release(delivery_id)
    return host.status(delivery_id)


def _mark_stopped(host: HostCore, delivery_id: str, message: str) -> None:
    row = host.store.delivery(delivery_id)
    assert row is not None
    detail = {**row["detail"], "message": message, "stopped_from": row["status"]}
    with host.leases.transaction(delivery_id) as tx:
        tx.set_status(
            delivery_id, DeliveryStatus.STOPPED.value, ErrorCode.STOP_REQUESTED.value, detail, None
        )
        tx.clear_stop(delivery_id)


async def _await_stopped(host: HostCore, delivery_id: str, wait_s: float) -> StatusReport:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        report = host.status(delivery_id)
        if report.status is not DeliveryStatus.RUNNING:
            return report
        await asyncio.sleep(0.05)
    return host.status(delivery_id)
