"""``restart-from-savepoint``: custody, checkpoint and journal go back together.

1. Custody restores the named savepoint and verifies it; if it cannot confirm
   the tree, nothing else happens and the delivery is in ``intervention``.
2. The checkpoint forks from the first checkpoint that embodied the savepoint.
3. In the fork's own transaction, the journal invalidates every activation
   that moved after that checkpoint (and, by closure, everything depending on
   them). Invalidated activations keep their numbers; the forked state
   renumbers what it will run again, and forgets suspensions and waits that
   belonged to the abandoned future (their correlations become stale).

Either the fork and its invalidation batch commit together, or neither does.
The run that follows journals each re-run action attempt as started (with its
launch record) in its input checkpoint, before anything is invoked, as every
other dispatch does: a runner killed during a re-run leaves it on record as
interrupted.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from typing import Any

from contracts import ActionNode, AdmittedDelivery, ErrorCode, SavepointId, digest_of, error
from contracts._status import DeliveryStatus
from host._context import DeliveryContext, StepWriter
from host._core import HostCore
from host._flow import unfired_barriers
from host._interrupted import interrupted_attempts, reap_interrupted
from host._outbox import OutboxItem

_MERGED = ("pending", "suspensions", "waits", "halted")


async def restart_from_savepoint(
    host: HostCore,
    delivery: AdmittedDelivery,
    token: int,
    actor: str,
    reason: str,
    savepoint: str | None,
) -> None:
    """Apply the directive; see the module docstring."""
    did = delivery.delivery_id
    row = host.store.delivery(did)
    assert row is not None
    if row["status"] in {DeliveryStatus.COMPLETED, DeliveryStatus.CANCELLED}:
        raise error(
            ErrorCode.DIRECTIVE_NOT_APPLICABLE,
            f"the delivery is {row['status']}",
            path=did,
            expected="a delivery that has not succeeded or been cancelled",
        )
    known = {sp["savepoint"]: sp for sp in host.store.savepoint_checkpoints(did)}
    if savepoint is None or savepoint not in known:
        raise error(
            ErrorCode.SAVEPOINT_UNKNOWN,
            f"savepoint {savepoint!r} is not one of this delivery's committed savepoints",
            path=savepoint or did,
            expected="a savepoint listed by 'execsys inspect'",
        )
    fork_at = known[savepoint]["first"]
    events_at = _events_at(host, did, fork_at)
    # Whatever a dead runner left running of the current position dies first.
    if host.store.latest_checkpoint(did) is not None:
        now = await host.values(delivery)
        await reap_interrupted(host, delivery, interrupted_attempts(delivery, now))

    restored = await asyncio.to_thread(host.custody.restore, did, SavepointId(savepoint))
    if not restored.confirmed:
        message = f"restore of savepoint {savepoint} is uncertain: " + ", ".join(
            restored.differences[:3]
        )
        with host.leases.transaction(did) as tx:
            tx.set_status(
                did,
                "intervention",
                ErrorCode.CUSTODY_RESTORE_UNCERTAIN.value,
                {**row["detail"], "message": message},
                None,
            )
        raise error(
            ErrorCode.CUSTODY_RESTORE_UNCERTAIN,
            "custody could not confirm the restore",
            path=savepoint,
            expected="a verified tree; the delivery is in intervention",
        )

    host.journals.drive(delivery)
    try:
        values: dict[str, Any] = dict((await host.snapshot(delivery, fork_at)).values)
        journal = host.journals.journal(did)
        projection = journal.projection()
        moved = {(e["node"], e["activation"]) for e in journal.fields_since(events_at)}
        # Work that was suspended, waiting or halted at the fork point is abandoned too:
        # it will run again as a fresh activation.
        for channel in ("suspensions", "waits", "halted"):
            for node in values.get(channel) or {}:
                site = (values.get("pending") or {}).get(node) or (values.get(channel) or {})[node]
                if "activation" in site:
                    moved.add((node, int(site["activation"])))
        targets = sorted(
            key
            for key in moved
            if key in projection.activations
            and projection.activations[key].state.value not in {"invalidated", "superseded"}
        )
        update, wake = _forked_state(delivery, values, targets, projection.current)
        directive = {
            "directive": "restart-from-savepoint",
            "savepoint": savepoint,
            "checkpoint": fork_at,
            "actor": actor,
            "reason": reason,
            "id": uuid.uuid4().hex,
        }
        source = digest_of(directive)
        outbox: list[OutboxItem] = [{"type": "record", "digest": source, "value": directive}]
        if targets:
            outbox.append(
                {
                    "type": "invalidate",
                    "request": f"restart/{directive['id']}",
                    "targets": [list(t) for t in targets],
                    "source": {"kind": "directive", "id": directive["id"], "digest": source},
                    "policy": "restart-from-savepoint",
                    "actor": {"id": actor, "kind": "human"},
                    "rationale": reason,
                }
            )
        present = await host.values(delivery)
        for correlation, state in (present.get("correlations") or {}).items():
            if state == "pending":
                update["correlations"][correlation] = "stale"
        update["outbox"] = outbox
        update["run"] = {
            "status": "stopped",
            "outcome": ErrorCode.STOP_REQUESTED.value,
            "message": f"restarted from savepoint {savepoint} by {actor}",
        }
        update["savepoint"] = {"head": savepoint}
        await host.substrate.update(delivery, update, token, fork_at)
    except Exception:
        host.journals.forget(did)
        raise
    finally:
        host.journals.release(did)
    ctx = host.context(delivery)
    first: dict[str, Any] = {
        "run": {
            "status": "running",
            "outcome": "",
            "message": f"restarted from savepoint {savepoint} by {actor}",
        },
        "wake": wake,
    }
    pending, dispatched = _dispatch_reruns(ctx, await host.values(delivery), update["pending"])
    if pending:
        first["pending"] = pending
        first["outbox"] = dispatched
    await host.drive(delivery, first, token, ctx)


def _dispatch_reruns(
    ctx: DeliveryContext, values: dict[str, Any], rerun: dict[str, Any]
) -> tuple[dict[str, Any], list[OutboxItem]]:
    """Journal each re-run action attempt as started; its site and the drafts to commit."""
    pending: dict[str, Any] = {}
    outbox: list[OutboxItem] = []
    for node, site in rerun.items():
        spec = ctx.info.graph.nodes[node]
        if not isinstance(spec, ActionNode):
            continue
        if spec.max_visits is not None and int(site.get("visit", 1)) > spec.max_visits:
            continue  # its own step fails the delivery (MAX_VISITS_EXCEEDED)
        writer = StepWriter(ctx, values, node)
        pending[node] = writer.dispatch(node, site)
        outbox.extend(writer.outbox)
    return pending, outbox


def _events_at(host: HostCore, delivery: str, checkpoint: str) -> int:
    return host.store.checkpoint_events(delivery, checkpoint)


def _forked_state(
    delivery: AdmittedDelivery,
    values: dict[str, Any],
    targets: Sequence[tuple[str, int]],
    latest: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The update that turns the fork point's state into one that can run again."""
    invalidated = set(targets)
    update: dict[str, Any] = {name: {} for name in (*_MERGED, "activations", "correlations")}
    wake: dict[str, Any] = {}
    rerun = dict(values.get("pending") or {})
    for node, site in (values.get("suspensions") or {}).items():
        update["suspensions"][node] = None
        update["correlations"][site["correlation"]] = "stale"
    for node in values.get("waits") or {}:
        update["waits"][node] = None
    for node in values.get("halted") or {}:
        update["halted"][node] = None
    for node, site in rerun.items():
        number = int(site["activation"])
        if (node, number) in invalidated or int(latest.get(node, 0)) >= number:
            number = int(latest.get(node, 0)) + 1
        fresh = {k: v for k, v in site.items() if k in {"visit", "predecessors"}}
        update["pending"][node] = {**fresh, "activation": number, "attempt": 1, "turn": 1}
        wake[node] = {}
    for node, number in latest.items():
        update["activations"][node] = max(
            int(number), int((values.get("activations") or {}).get(node, 0))
        )
    for node, site in update["pending"].items():
        update["activations"][node] = max(
            update["activations"].get(node, 0), int(site["activation"])
        )
    for barrier in unfired_barriers(delivery, values):
        wake[barrier] = {}
    json.dumps(update)  # the update must stay JSON-native
    return update, wake
