"""Custody for a fleet that shares a store but no disk: every savepoint also in the store.

With a store that offers a :class:`~host.storage.CustodyArchive` (PostgreSQL),
the Host wraps its custody in :class:`ArchivedCustody`. The archive is then the
truth about a delivery's workspace and the local custody folder is a cache:

- a savepoint is archived (manifest, the contents the archive lacks, the new
  head) in a fenced transaction *before* the local head moves, and so before
  the checkpoint that names it commits;
- before a runner drives a delivery (:meth:`ArchivedCustody.prepare`), it
  brings the local cache to the archived head: it imports what it lacks and
  restores the workspace, which custody verifies file by file against the
  manifest; a workspace it cannot confirm is refused, never driven;
- ``head`` and ``savepoints`` answer from the archive, so every machine sees
  the same custody state.

Steps that leave the workspace unchanged cost nothing here: their savepoint is
the head already archived. See ``docs/decisions/0122-custody-archive.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

from contracts import (
    CustodyPreview,
    CustodyVerdict,
    DeliveryId,
    ErrorCode,
    ExecsysError,
    ExecutionSite,
    RestoreResult,
    SavepointExport,
    SavepointId,
    SavepointInfo,
    SignedCapability,
    TransferableCustody,
    WorkspaceMode,
    error,
)
from host import _faults
from host.storage import ArchivedSavepoint, CustodyArchive, StorageTx

#: Bytes of contents sent per transaction (a larger content goes alone).
BATCH_BYTES = 16 * 1024 * 1024

Fenced = Callable[[str], AbstractContextManager[StorageTx]]
"""A write transaction that first proves the caller holds the delivery's lease."""


class ArchivedCustody:
    """A :class:`contracts.Custody` whose savepoints are also kept in the store's archive."""

    def __init__(
        self, custody: TransferableCustody, archive: CustodyArchive, transaction: Fenced
    ) -> None:
        self.custody = custody
        self.archive = archive
        self._transaction = transaction
        self._heads: dict[str, str] = {}
        """The archived head of each delivery as this process last wrote or read it."""
        self._digests: dict[str, frozenset[str]] = {}
        """The contents the delivery's archived head names (only new ones are sent)."""

    # --- archive side ----------------------------------------------------------------

    def _publish(self, delivery: DeliveryId, savepoint: SavepointId) -> None:
        """Archive a locally recorded savepoint and make it the archived head."""
        exported = self.custody.export_savepoint(delivery, savepoint)
        known = self._digests.get(delivery, frozenset())
        refs = [digest for digest in exported.digests if digest not in known]
        entry = ArchivedSavepoint(
            savepoint=savepoint,
            record=exported.record,
            manifest=exported.manifest,
            files=exported.info.files,
            bytes=exported.info.bytes,
            created=exported.info.created_at,
        )
        blobs: dict[str, bytes] = {}
        _faults.boundary("archive-publish", "before")
        for _attempt in range(3):
            with self._transaction(delivery) as tx:
                missing = self.archive.put(tx, delivery, savepoint, entry, refs, blobs)
            if not missing:
                break
            blobs = self._send(delivery, missing)
        else:
            raise error(
                ErrorCode.STORE_ERROR,
                "the archive kept losing contents while a savepoint was sent",
                path=savepoint,
            )
        _faults.boundary("archive-publish", "after")
        self._heads[delivery] = savepoint
        self._digests[delivery] = frozenset(exported.digests)

    def _send(self, delivery: DeliveryId, digests: Sequence[str]) -> dict[str, bytes]:
        """Store ``digests``' contents in the archive, at most ``BATCH_BYTES`` per transaction.

        They are read one by one from local custody, so the process holds one
        batch at a time, never the whole savepoint. The last batch is returned
        unsent: it travels with the savepoint's own transaction, so a savepoint
        whose new contents fit one batch costs no extra transaction.
        """
        batch: dict[str, bytes] = {}
        size = 0
        for digest in digests:
            content = self.custody.read_blobs([digest])[digest]
            if batch and size + len(content) > BATCH_BYTES:
                with self._transaction(delivery) as tx:
                    self.archive.put_contents(tx, delivery, batch)
                batch, size = {}, 0
            batch[digest] = content
            size += len(content)
        return batch

    def fetch(self, delivery: DeliveryId, savepoint: SavepointId) -> None:
        """Import an archived savepoint this custody lacks (contents checked on import).

        The workspace is not touched: an exported tree (``goal export``) needs
        only the savepoint in the local cache.
        """
        if self.custody.has_savepoint(delivery, savepoint):
            return
        entry = self.archive.savepoint(delivery, savepoint)
        if entry is None:
            raise error(
                ErrorCode.CUSTODY_SAVEPOINT_UNKNOWN,
                "the savepoint is not archived for this delivery",
                path=savepoint,
            )
        exported = SavepointExport(
            record=entry.record,
            manifest=entry.manifest,
            info=SavepointInfo(
                savepoint=savepoint, files=entry.files, bytes=entry.bytes, created_at=entry.created
            ),
            digests=(),
        )
        self.custody.import_savepoint(delivery, exported, self.archive.blobs)

    def prepare(self, delivery: DeliveryId) -> None:
        """Bring the local workspace to the archived head before driving the delivery."""
        head = self.archive.head(delivery)
        if head is None:
            return
        self._heads[delivery] = head
        try:
            local: str | None = self.custody.head(delivery)
        except ExecsysError:  # no local head: this machine never had the delivery
            local = None
        if local == head:
            return
        self._digests.pop(delivery, None)
        self.fetch(delivery, SavepointId(head))
        restored = self.custody.restore(delivery, SavepointId(head))
        if not restored.confirmed:
            raise error(
                ErrorCode.CUSTODY_RESTORE_UNCERTAIN,
                "this machine's copy of the workspace could not be confirmed: "
                + "; ".join(restored.differences[:3]),
                path=delivery,
            )

    # --- the Custody protocol --------------------------------------------------------------

    def open(self, delivery: DeliveryId, seed: str | None = None) -> SavepointId:
        """Open and archive the first savepoint; a delivery archived elsewhere is fetched."""
        if self.archive.head(delivery) is not None:
            self.prepare(delivery)
            return self.custody.head(delivery)
        head = self.custody.open(delivery, seed)
        self._publish(delivery, head)
        return head

    def workspace(self, delivery: DeliveryId) -> str:
        """The local workspace folder."""
        return self.custody.workspace(delivery)

    def head(self, delivery: DeliveryId) -> SavepointId:
        """The archived head (the same on every machine)."""
        head = self.archive.head(delivery)
        if head is None:
            return self.custody.head(delivery)
        return SavepointId(head)

    def issue(
        self,
        site: ExecutionSite,
        mode: WorkspaceMode,
        paths: tuple[str, ...] = (),
        ttl_s: float = 3600.0,
        *,
        protected: tuple[str, ...] = (),
    ) -> SignedCapability:
        """Delegate."""
        return self.custody.issue(site, mode, paths, ttl_s, protected=protected)

    def validate(self, preview: CustodyPreview) -> CustodyVerdict:
        """Delegate (a new savepoint is archived when it is advanced to)."""
        return self.custody.validate(preview)

    def advance(self, delivery: DeliveryId, savepoint: SavepointId) -> None:
        """Archive the savepoint (unless it is the archived head), then move the local head."""
        if self._heads.get(delivery) != savepoint:
            self._publish(delivery, savepoint)
        self.custody.advance(delivery, savepoint)

    def restore(self, delivery: DeliveryId, savepoint: SavepointId) -> RestoreResult:
        """Fetch the savepoint if this machine lacks it, restore, then move the archived head."""
        self.fetch(delivery, savepoint)
        restored = self.custody.restore(delivery, savepoint)
        if restored.confirmed and self._heads.get(delivery) != savepoint:
            with self._transaction(delivery) as tx:
                self.archive.set_head(tx, delivery, savepoint)
            self._heads[delivery] = savepoint
            self._digests.pop(delivery, None)
        return restored

    def savepoints(self, delivery: DeliveryId) -> list[SavepointInfo]:
        """The archived savepoints, oldest first."""
        return [
            SavepointInfo(
                savepoint=SavepointId(entry.savepoint),
                files=entry.files,
                bytes=entry.bytes,
                created_at=entry.created,
            )
            for entry in self.archive.savepoints(delivery)
        ] or self.custody.savepoints(delivery)

    def prune(self, delivery: DeliveryId, keep: Sequence[SavepointId]) -> int:
        """Forget the archived savepoints but ``keep`` and the head; return how many went.

        For a finished delivery (``goal export`` of a closed goal), like
        ``FileCustody.prune`` for the local copy. The contents the kept
        savepoints name are read from this machine's copy of them, fetched
        first if it lacks one; contents shared with another delivery stay.
        """
        head = self.archive.head(delivery)
        if head is None:
            return 0
        kept = sorted({*keep, SavepointId(head)})
        names: set[str] = set()
        for savepoint in kept:
            self.fetch(delivery, savepoint)
            names.update(self.custody.export_savepoint(delivery, savepoint).digests)
        with self._transaction(delivery) as tx:
            pruned = self.archive.prune(tx, delivery, kept, sorted(names))
        self._digests.pop(delivery, None)
        return pruned

    def retire(self, delivery: DeliveryId) -> None:
        """Retire locally, then drop the delivery from the archive."""
        self.custody.retire(delivery)
        with self._transaction(delivery) as tx:
            self.archive.drop(tx, delivery)
        self._heads.pop(delivery, None)
        self._digests.pop(delivery, None)
