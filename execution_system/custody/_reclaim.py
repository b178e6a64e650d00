"""Reclaiming custody's space: blobs nobody names, savepoints nobody will restore.

Both run with the store lock held exclusively (the caller's guard), so no
concurrent snapshot can decide to reuse a blob that is being deleted.
"""

from __future__ import annotations

from contracts import DeliveryId, ErrorCode, SavepointId
from execution_system.custody._blobs import BlobStore
from execution_system.custody._report import PruneReport
from execution_system.custody._state import DeliveryState
from execution_system.custody._tree import Refusal, decode_manifest
from host._faults import boundary


def collect_unreferenced(state: DeliveryState, blobs: BlobStore) -> int:
    """Delete every blob no manifest of any delivery names; return how many went.

    Deletes nothing if any manifest cannot be parsed: a leak is better than
    losing content that is still referenced.
    """
    keep: set[str] = set()
    for other in state.deliveries():
        for data in state.manifests(other):
            try:
                keep.update(e.sha256 for e in decode_manifest(data, None).values())
            except (ValueError, KeyError, TypeError):
                return 0
    return blobs.collect(keep)


def prune_savepoints(
    state: DeliveryState, blobs: BlobStore, delivery: DeliveryId, keep: tuple[SavepointId, ...]
) -> PruneReport:
    """Forget every savepoint of ``delivery`` but ``keep`` and the head, in a crash-safe order.

    The savepoint log is replaced first (atomically), so no listed savepoint
    ever lacks its manifest; then the other manifests are deleted; then the
    blobs no manifest names. A crash in between leaves only unlisted manifests
    or unreferenced blobs, which the next prune (or retire) removes.
    """
    head = state.head(delivery)
    if head is None:
        raise Refusal(ErrorCode.CUSTODY_WORKSPACE_UNKNOWN, delivery, "the delivery has no head")
    wanted = {*keep, head}
    for savepoint in sorted(wanted):
        if not state.has_manifest(delivery, savepoint):
            raise Refusal(
                ErrorCode.CUSTODY_SAVEPOINT_UNKNOWN,
                savepoint,
                "a savepoint to keep is not recorded for this delivery",
            )
    logged = state.savepoints(delivery)
    kept = [info for info in logged if info.savepoint in wanted]
    boundary("custody-prune-log", "before")
    if len(kept) != len(logged):
        state.rewrite_savepoints(delivery, kept)
    boundary("custody-prune-log", "after")
    boundary("custody-prune-manifests", "before")
    manifests = state.drop_manifests(delivery, wanted)
    boundary("custody-prune-manifests", "after")
    return PruneReport(
        kept=tuple(info.savepoint for info in kept),
        savepoints=len(logged) - len(kept),
        manifests=manifests,
        blobs=collect_unreferenced(state, blobs),
    )
