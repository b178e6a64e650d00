"""Attempts a runner left in flight when it died, and how a directive ends them.

An action attempt is journaled as started (with its launch record) by the step
that scheduled it, before it runs. If its runner dies before the attempt's own
step commits, the checkpoint still holds the attempt's site marked ``started``
and the journal shows it ``active``: that attempt is *interrupted*. Nothing
picks it up by itself. A directive (``recover continue``) then, in order:

1. finds processes the attempt left behind (by its invocation id), kills them
   and confirms they are gone — or, if it cannot tell, leaves the delivery in
   ``intervention``;
2. restores custody to the checkpoint's savepoint and verifies it, so nothing
   the killed attempt wrote survives (see ``_operator``);
3. journals the old attempt as failed (``ATTEMPT_INTERRUPTED``, by the operator)
   and a new attempt as authorized by the directive and started, in the input
   checkpoint of the run that invokes it — never the same attempt twice.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from contracts import (
    ActionNode,
    AdmittedDelivery,
    ErrorCode,
    NodeState,
    Transition,
    digest_of,
    error,
)
from host._context import DeliveryContext, StepWriter, invocation_id
from host._core import HostCore
from host._launches import reap
from host._outbox import OutboxItem

_RESET = ("started", "session", "response", "halts", "directive")


def interrupted_attempts(
    delivery: AdmittedDelivery, values: Mapping[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """(node, site) of every action attempt started but neither committed nor parked."""
    parked = (
        set(values.get("suspensions") or {})
        | set(values.get("waits") or {})
        | set(values.get("halted") or {})
    )
    found = []
    for node, site in sorted((values.get("pending") or {}).items()):
        spec = delivery.graph.nodes.get(node)
        if site.get("started") and node not in parked and isinstance(spec, ActionNode):
            found.append((node, dict(site)))
    return found


def _launch(host: HostCore, delivery: str, node: str, activation: int, attempt: int) -> Any:
    """The launch record the attempt's ``work-started`` event references, if any."""
    for line in reversed(host.store.journal_lines(delivery)[1:]):
        event = json.loads(line)
        if (
            event["node"] == node
            and event["activation"] == activation
            and event["transition"] == Transition.WORK_STARTED
            and (event.get("attempt") or {}).get("sequence") == attempt
        ):
            for ref in event.get("refs", []):
                if ref["kind"] == "launch":
                    return host.load_record(ref["digest"])
            return None
    return None


async def reap_interrupted(
    host: HostCore, delivery: AdmittedDelivery, attempts: list[tuple[str, dict[str, Any]]]
) -> None:
    """Make sure nothing of the interrupted attempts still runs, or refuse to go on."""
    did = delivery.delivery_id
    for node, site in attempts:
        activation, attempt = int(site["activation"]), int(site.get("attempt", 1))
        invocation = invocation_id(did, node, activation, attempt)
        launch = _launch(host, did, node, activation, attempt)
        found = await asyncio.to_thread(reap, launch, invocation)
        if found.unknown:
            message = (
                f"attempt {attempt} of '{node}' (activation {activation}) may still be running: "
                f"{found.unknown}"
            )
            host.mark_intervention(did, message)
            raise error(
                ErrorCode.RECOVERY_UNCERTAIN,
                message,
                path=f"{node}#{activation}",
                expected="its processes gone (stop them, then issue the directive again)",
            )


def redispatch(
    ctx: DeliveryContext,
    values: Mapping[str, Any],
    attempts: list[tuple[str, dict[str, Any]]],
    directive: Mapping[str, Any],
) -> tuple[dict[str, Any], list[OutboxItem]]:
    """End each interrupted attempt as history and start the next one under ``directive``.

    Returns the new pending sites and the outbox (records and journal drafts)
    to commit with the input checkpoint of the run that invokes them.
    """
    operator = {"id": str(directive["actor"]), "kind": "human"}
    outbox: list[OutboxItem] = []
    pending: dict[str, Any] = {}
    if not attempts:
        return pending, outbox
    grant = digest_of(dict(directive))
    outbox.append({"type": "record", "digest": grant, "value": dict(directive)})
    ctx.cache_record(grant, dict(directive))
    for node, site in attempts:
        writer = StepWriter(ctx, values, node)
        activation, attempt = int(site["activation"]), int(site.get("attempt", 1))
        writer.event(
            node,
            activation,
            Transition.WORK_FAILED,
            NodeState.ACTIVE,
            NodeState.FAILED,
            attempt=attempt,
            actor=operator,
            error={
                "code": ErrorCode.ATTEMPT_INTERRUPTED.value,
                "message": f"attempt {attempt} was interrupted before its result committed",
            },
            rationale=f"{directive['kind']}: {directive.get('reason', '')}",
            request=f"{node}/{activation}/interrupted/{attempt}",
        )
        fresh = {k: v for k, v in site.items() if k not in _RESET}
        fresh.update(attempt=attempt + 1, turn=1, directive=directive["id"])
        pending[node] = writer.dispatch(
            node,
            fresh,
            authorization={"kind": "directive", "id": str(directive["id"]), "digest": grant},
            actor=operator,
            rationale=f"{directive['kind']}: {directive.get('reason', '')}",
        )
        outbox.extend(writer.outbox)
    return pending, outbox
