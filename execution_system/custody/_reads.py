"""Reading recorded savepoints out of custody: into a folder, as entries; a delivery's exclusions.

The mixins here and in ``_transfer.py`` work on the parts of ``FileCustody``
named by :class:`CustodyParts`; each maps custody's internal refusals to
catalogued errors the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from contracts import DeliveryId, ErrorCode, FileEntry, SavepointId, error
from execution_system.custody._blobs import BlobStore
from execution_system.custody._restore import write_exactly
from execution_system.custody._state import DeliveryState, check_delivery
from execution_system.custody._tree import Refusal, Tree


class CustodyParts(Protocol):
    """What the mixins of ``FileCustody`` use of it."""

    _state: DeliveryState
    _blobs: BlobStore

    def _guard(
        self, delivery: str, *, exclusive_store: bool = False
    ) -> AbstractContextManager[None]: ...

    def _tree(self, delivery: str, savepoint: str) -> Tree: ...

    def _exclusions(self, delivery: str) -> frozenset[str]: ...


def folder_names(names: Iterable[str]) -> frozenset[str]:
    """``names`` as a set of excluded folder names; ValueError for anything but one folder name."""
    for name in names:
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"an excluded name must be one folder name, not {name!r}")
    return frozenset(names)


def recorded_tree(parts: CustodyParts, delivery: DeliveryId, savepoint: SavepointId) -> Tree:
    """The tree of a recorded savepoint; ``CUSTODY_SAVEPOINT_UNKNOWN`` if it is not recorded."""
    try:
        return parts._tree(check_delivery(delivery), savepoint)
    except Refusal as refusal:
        raise error(refusal.code, refusal.message, path=refusal.path) from None
    except ValueError as exc:
        raise error(ErrorCode.CUSTODY_SAVEPOINT_UNKNOWN, str(exc), path=savepoint) from None


class SavepointReads:
    """The reading half of ``FileCustody`` beyond the Custody protocol."""

    def export(
        self: CustodyParts, delivery: DeliveryId, savepoint: SavepointId, target: Path
    ) -> None:
        """Write a recorded savepoint's tree into the empty folder ``target``, verified.

        The delivery's workspace is not touched; ``target`` is the caller's.
        """
        tree = recorded_tree(self, delivery, savepoint)
        write_exactly(target, tree, self._blobs, savepoint)

    def excluded(self: CustodyParts, delivery: DeliveryId) -> tuple[str, ...]:
        """The folder names the delivery's trees leave out (sorted; recorded at open).

        Anyone re-deriving a savepoint from a workspace copy must leave out the
        same names; a delivery opened before exclusions were recorded has none.
        """
        try:
            return tuple(sorted(self._exclusions(check_delivery(delivery))))
        except Refusal as refusal:
            raise error(refusal.code, refusal.message, path=refusal.path) from None

    def set_exclusions(self: CustodyParts, delivery: DeliveryId, names: frozenset[str]) -> None:
        """Choose the folder names left out of ``delivery``'s trees, before it is opened.

        For a caller whose deliveries differ in what they leave out (a goal's
        ``--exclude``); ``open`` then uses these instead of the instance's own.
        Once recorded they never change: setting others is ``CUSTODY_REJECTED``.
        """
        try:
            check_delivery(delivery)
        except Refusal as refusal:
            raise error(refusal.code, refusal.message, path=refusal.path) from None
        names = folder_names(names)
        with self._guard(delivery):
            recorded = self._state.recorded_exclusions(delivery)
            if recorded is None:
                self._state.create(delivery)
                self._state.record_exclusions(delivery, names)
            elif recorded != names:
                raise error(
                    ErrorCode.CUSTODY_REJECTED,
                    "the delivery's excluded folders are already recorded, and differ",
                    path=delivery,
                    expected=", ".join(sorted(recorded)) or "(none)",
                )

    def manifest(
        self: CustodyParts, delivery: DeliveryId, savepoint: SavepointId
    ) -> tuple[FileEntry, ...]:
        """The entries of a recorded savepoint, sorted by path."""
        tree = recorded_tree(self, delivery, savepoint)
        return tuple(tree[path].to_file_entry() for path in sorted(tree))
