"""Copying savepoints between custodies on different machines (``TransferableCustody``).

A fleet whose runners do not share a data folder keeps every savepoint a
delivery reaches in the store too (``host/_archive.py``). What travels is the
delivery's custody record (its exclusions), the manifest and the contents;
what arrives is checked before anything is written: the manifest must hash to
the savepoint id, every content to its digest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence

from contracts import (
    DeliveryId,
    ErrorCode,
    ExecsysError,
    SavepointExport,
    SavepointId,
    SavepointInfo,
    canonical_bytes,
    error,
)
from execution_system.custody._blobs import DIGEST_PREFIX
from execution_system.custody._reads import CustodyParts, recorded_tree
from execution_system.custody._state import check_delivery
from execution_system.custody._tree import (
    Refusal,
    decode_manifest,
    savepoint_of,
    tree_bytes,
)

#: Contents asked for per ``fetch`` call (one store round trip each), at most.
_FETCH_RUN = 256
#: Bytes asked for per ``fetch`` call, at most (a larger content comes alone).
FETCH_BYTES = 16 * 1024 * 1024

#: Format tag of the exported delivery record.
_RECORD_FORMAT = "execution-system/custody-record/v1"


def _rejected(message: str, path: str) -> ExecsysError:
    return error(ErrorCode.CUSTODY_REJECTED, message, path=path)


class SavepointTransfer:
    """The :class:`contracts.TransferableCustody` half of ``FileCustody``."""

    def export_savepoint(
        self: CustodyParts, delivery: DeliveryId, savepoint: SavepointId
    ) -> SavepointExport:
        """A recorded savepoint with the delivery's record, ready to be kept elsewhere."""
        tree = recorded_tree(self, delivery, savepoint)
        try:
            manifest = self._state.manifest(delivery, savepoint)
            exclude = self._exclusions(delivery)
        except Refusal as refusal:
            raise error(refusal.code, refusal.message, path=refusal.path) from None
        if manifest is None:
            raise error(ErrorCode.CUSTODY_SAVEPOINT_UNKNOWN, "not recorded", path=savepoint)
        info = next(
            (i for i in self._state.savepoints(delivery) if i.savepoint == savepoint), None
        ) or SavepointInfo(
            savepoint=savepoint,
            files=len(tree),
            bytes=tree_bytes(tree),
            created_at=0.0,
        )
        record = canonical_bytes({"format": _RECORD_FORMAT, "exclude": sorted(exclude)})
        digests = tuple(dict.fromkeys(entry.sha256 for entry in tree.values()))
        return SavepointExport(record=record, manifest=manifest, info=info, digests=digests)

    def has_savepoint(self: CustodyParts, delivery: DeliveryId, savepoint: SavepointId) -> bool:
        """Whether ``savepoint`` is recorded here for the delivery."""
        try:
            return self._state.has_manifest(check_delivery(delivery), savepoint)
        except Refusal:
            return False

    def missing_blobs(self: CustodyParts, digests: Sequence[str]) -> list[str]:
        """Those of ``digests`` whose content is not stored here."""
        return [digest for digest in digests if not self._blobs.has(digest)]

    def read_blobs(self: CustodyParts, digests: Sequence[str]) -> dict[str, bytes]:
        """The stored contents of ``digests``."""
        found: dict[str, bytes] = {}
        for digest in digests:
            try:
                with self._blobs.open(digest) as handle:
                    found[digest] = handle.read()
            except (FileNotFoundError, ValueError):
                raise error(
                    ErrorCode.CUSTODY_SAVEPOINT_UNKNOWN, "a content is not stored", path=digest
                ) from None
        return found

    def import_savepoint(
        self: CustodyParts,
        delivery: DeliveryId,
        exported: SavepointExport,
        fetch: Callable[[Sequence[str]], Mapping[str, bytes]],
    ) -> None:
        """Record a savepoint exported elsewhere; every content fetched is checked first."""
        savepoint = exported.info.savepoint
        try:
            check_delivery(delivery)
        except Refusal as refusal:
            raise error(refusal.code, refusal.message, path=refusal.path) from None
        if savepoint_of(exported.manifest) != savepoint:
            raise _rejected("the manifest is not the savepoint it claims", savepoint)
        try:
            tree = decode_manifest(exported.manifest, savepoint)
            document = _record(exported.record)
        except (ValueError, KeyError, TypeError) as exc:
            raise _rejected(f"unreadable savepoint transfer: {exc}", savepoint) from None
        sizes = {entry.sha256: entry.size for entry in tree.values()}
        wanted = [digest for digest in sizes if not self._blobs.has(digest)]
        with self._guard(delivery):
            batch = self._blobs.batch()
            try:
                # One run at a time: fetched, checked and staged before the next is
                # asked for, so no more than a run's bytes are ever held here.
                for run in _runs(wanted, sizes):
                    blobs = fetch(run)
                    for digest in run:
                        content = blobs.get(digest)
                        if content is None:
                            raise _rejected("a content of the savepoint was not sent", digest)
                        if DIGEST_PREFIX + hashlib.sha256(content).hexdigest() != digest:
                            raise _rejected("a content does not match its digest", digest)
                        if batch.wanted(digest):
                            batch.add_bytes(digest, content)
                    del blobs
                batch.commit()
            finally:
                batch.discard()
            self._state.create(delivery)
            if self._state.recorded_exclusions(delivery) is None:
                self._state.record_exclusions(delivery, document)
            self._state.record(delivery, exported.manifest, exported.info)


def _runs(digests: list[str], sizes: Mapping[str, int]) -> Iterator[list[str]]:
    """``digests`` in runs of at most ``_FETCH_RUN`` contents and ``FETCH_BYTES`` bytes."""
    run: list[str] = []
    size = 0
    for digest in digests:
        if run and (len(run) == _FETCH_RUN or size + sizes[digest] > FETCH_BYTES):
            yield run
            run, size = [], 0
        run.append(digest)
        size += sizes[digest]
    if run:
        yield run


def _record(data: bytes) -> frozenset[str]:
    document = json.loads(data)
    if not isinstance(document, dict) or document.get("format") != _RECORD_FORMAT:
        raise ValueError("not a custody delivery record")
    return frozenset(str(name) for name in document["exclude"])
