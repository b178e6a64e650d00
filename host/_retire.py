"""Retirement: delete a delivery's Host-owned records once; keep a durable fact.

Owner-scoped and idempotent per authorization: the same authorization gets
the same fact back, a different one fails closed. The lease serializes
concurrent retirements, and the store transaction makes the destructive part
happen exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from contracts import DeliveryId, ErrorCode, ExecsysError, error
from contracts._status import RETIRABLE
from host._core import HostCore
from host._reports import RetirementFact
from host.storage import StorageTx


async def retire(
    host: HostCore, delivery_id: str, authorization: str, actor: str
) -> RetirementFact:
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
    host: HostCore, delivery_id: str, authorization: str, actor: str
) -> RetirementFact:
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
        await asyncio.to_thread(host.custody.retire, DeliveryId(delivery_id))
    return RetirementFact(**fact, performed=performed)


def _retire_rows(tx: StorageTx, delivery_id: str, authorization: str, actor: str) -> dict[str, Any]:
    from contracts import digest_of

    row = tx.delivery(delivery_id)
    if row is None:
        raise error(ErrorCode.DELIVERY_NOT_FOUND, "no such delivery", path=delivery_id)
    status, digest, graph = row["status"], row["digest"], row["graph_digest"]
    if status not in RETIRABLE:
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
