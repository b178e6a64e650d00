"""Stop requests: an operator's message to whoever drives a delivery.

A request is recorded without a lease (it is a message, not a holder's write);
the driving runner polls for it and honours it at its next safe boundary, and
clears it (a fenced write) once the delivery is stopped or a directive
overrides it.
"""

from __future__ import annotations

import json
import time

from host._lease import LeaseManager
from host.storage import Storage


def request_stop(store: Storage, delivery_id: str, actor: str, reason: str) -> None:
    """Record that ``actor`` asked the delivery to stop, and why."""
    # A request, not a holder's write: whoever holds the lease honours it (unfenced).
    with store.transaction() as tx:
        # The actor text holds who and why (JSON); older rows hold the name alone.
        tx.request_stop(delivery_id, time.time(), json.dumps({"actor": actor, "reason": reason}))


def stop_request(store: Storage, delivery_id: str) -> dict[str, str] | None:
    """Who asked this delivery to stop and why, if anyone did (checked by its runner)."""
    raw = store.stop_request(delivery_id)
    if raw is None:
        return None
    try:
        found = json.loads(raw)
    except (TypeError, ValueError):
        found = None
    if not isinstance(found, dict):
        return {"actor": raw, "reason": ""}
    return {"actor": str(found.get("actor", "")), "reason": str(found.get("reason", ""))}


def clear_stop(leases: LeaseManager, delivery_id: str) -> None:
    """Forget a stop request (it was honoured, or a directive overrides it)."""
    with leases.transaction(delivery_id) as tx:
        tx.clear_stop(delivery_id)
