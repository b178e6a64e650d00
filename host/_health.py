"""What only a directive can resolve: orphaned runs, interventions, disagreeing heads.

Startup never dispatches work: a delivery left ``running`` by a runner that
died, one in ``intervention``, a ``stopped`` one, and one whose checkpoint,
journal head and custody savepoint disagree are *listed* with the reason.
"""

from __future__ import annotations

from contracts import DeliveryId, ExecsysError
from contracts._status import AT_REST, DeliveryStatus
from host._core import HostCore
from host._reports import NeededDirective
from host._stop import NOT_STOPPABLE

ORPHANED = "its runner is gone (crashed or killed) in the middle of a step"
HUNG = "its runner stopped renewing its lease (hung?) in the middle of a step"


def custody_head(host: HostCore, delivery_id: str) -> str | None:
    """Custody's head savepoint, read independently (None if custody has no workspace)."""
    try:
        return str(host.custody.head(DeliveryId(delivery_id)))
    except ExecsysError:
        return None


def consistency(host: HostCore, delivery_id: str) -> list[str]:
    """Disagreements between checkpoint, journal and custody, each read on its own."""
    row = host.store.delivery(delivery_id)
    if row is None or row["status"] == DeliveryStatus.RETIRED:
        return []
    problems: list[str] = []
    detail = row["detail"]
    expected = detail.get("journal") or {}
    head, count = host.store.journal_head(delivery_id)
    if expected and (expected.get("head"), expected.get("events")) != (head, count):
        problems.append(
            f"journal head {head} ({count} events) differs from the checkpoint's "
            f"{expected.get('head')} ({expected.get('events')} events)"
        )
    checkpoint_savepoint = detail.get("savepoint")
    found = custody_head(host, delivery_id)
    if checkpoint_savepoint and found != checkpoint_savepoint:
        problems.append(
            f"custody head {found} differs from the checkpoint's savepoint {checkpoint_savepoint}"
        )
    return problems


def needs_directive(host: HostCore) -> list[NeededDirective]:
    """Deliveries that only a directive can move, and why (startup dispatches nothing)."""
    listed = []
    for row in host.store.deliveries():
        delivery, status = row["delivery"], row["status"]
        reasons = []
        lease = host.leases.state(delivery)["state"] if status == DeliveryStatus.RUNNING else "held"
        if lease == "expired":
            reasons.append(HUNG)
        elif lease != "held":
            reasons.append(ORPHANED)
        if status == DeliveryStatus.INTERVENTION:
            stored = host.store.delivery(delivery)
            detail = stored["detail"] if stored is not None else {}
            reasons.append(detail.get("message") or "intervention required")
        if status == DeliveryStatus.STOPPED:
            reasons.append("stopped by an operator")
        if status not in NOT_STOPPABLE and status not in AT_REST:
            # At rest, the heads were committed together and cannot have drifted
            # (``inspect`` still compares them); checking 10,000 resting
            # deliveries one by one would make every listing slow.
            reasons.extend(consistency(host, delivery))
        if reasons:
            listed.append(
                NeededDirective(
                    delivery=DeliveryId(delivery),
                    status=DeliveryStatus(status),
                    reasons=tuple(reasons),
                )
            )
    return listed
