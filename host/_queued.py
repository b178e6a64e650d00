"""Queued requests: an answer, resolution or directive recorded for a runner to perform.

See :mod:`host._queue` for the runner's side and decision 0091 for the design.
"""

from __future__ import annotations

from typing import Any

from contracts._status import DeliveryStatus
from host._core import HostCore


def queue_request(host: HostCore, delivery_id: str, op: str, request: dict[str, Any]) -> None:
    """Record a checked request (answer, resolve, recover) and queue the delivery for a runner.

    Called under the delivery's lease. The status row keeps the request and the
    status it was queued from, so a runner that claims the delivery performs the
    request, and a refusal then puts the row back as it was.
    """
    row = host.store.delivery(delivery_id)
    assert row is not None
    was = {
        "status": row["status"],
        "outcome": row["outcome"],
        "message": row["detail"].get("message"),
    }
    detail = {
        **row["detail"],
        "message": f"{op} queued for a runner",
        "queued": {"op": op, "request": request, "was": was},
    }
    with host.leases.transaction(delivery_id) as tx:
        tx.set_status(delivery_id, DeliveryStatus.QUEUED.value, row["outcome"], detail, None)
