"""Invalidation: an activation found wrong after the fact, and everything that used it."""

from __future__ import annotations

import uuid

from contracts import ErrorCode, NodeId, digest_of, error
from contracts._status import StatusReport
from host._core import HostCore


async def invalidate(
    host: HostCore, delivery_id: str, node: str, *, actor: str, reason: str
) -> StatusReport:
    """Invalidate ``node``'s latest activation and its whole descendant closure.

    Used when a record an activation produced is found wrong after the fact (for
    example a frozen source that changed): the journal keeps the history and
    marks everything that depended on it as no longer current. The events
    commit with a checkpoint, like every other journal write.
    """
    async with host.lock(delivery_id):
        delivery = host.delivery(delivery_id)
        token = host.leases.acquire(delivery_id, wait_s=5.0)
        try:
            host.journals.drive(delivery)
            projection = host.journals.journal(delivery_id).projection()
            latest = projection.current.get(NodeId(node))
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
            await host.substrate.update(delivery, update, token)
        except Exception:
            host.journals.forget(delivery_id)
            raise
        finally:
            host.journals.release(delivery_id)
            host.leases.release(delivery_id)
    return host.status(delivery_id)
