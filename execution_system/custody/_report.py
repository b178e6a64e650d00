"""What a snapshot reports, and the parsed manifests a custody instance keeps."""

from __future__ import annotations

import threading

from pydantic import BaseModel, ConfigDict

from contracts import SavepointId
from execution_system.custody._tree import Tree

#: Parsed manifests kept in memory, by savepoint id (a manifest is immutable).
_TREE_CACHE_SIZE = 8


class PruneReport(BaseModel):
    """What one :meth:`FileCustody.prune` removed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kept: tuple[SavepointId, ...]
    """The savepoints left, oldest first (the head always among them)."""
    savepoints: int
    """Savepoints removed from the log."""
    manifests: int
    """Manifests deleted (more than ``savepoints`` after an interrupted earlier prune)."""
    blobs: int
    """Blobs deleted because no remaining manifest of any delivery names them."""


class SnapshotReport(BaseModel):
    """What one :meth:`FileCustody.snapshot` recorded and what it had to read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    savepoint: SavepointId
    """The savepoint capturing the observed tree."""
    files: int
    """Entries in the tree."""
    bytes: int
    """Total content size."""
    hashed_files: int
    """Files read (stat cache misses; every file under ``full_verify``)."""
    hashed_bytes: int
    """Bytes read to hash them."""


class TreeMemory:
    """The last few parsed manifests, by savepoint id (thread-safe)."""

    def __init__(self) -> None:
        self._trees: dict[str, Tree] = {}
        self._lock = threading.Lock()

    def get(self, savepoint: str) -> Tree | None:
        """The parsed tree of ``savepoint``, if remembered."""
        with self._lock:
            return self._trees.get(savepoint)

    def remember(self, savepoint: str, tree: Tree) -> None:
        """Keep ``tree`` as the parse of ``savepoint``, forgetting the oldest beyond the bound."""
        with self._lock:
            if savepoint not in self._trees and len(self._trees) >= _TREE_CACHE_SIZE:
                self._trees.pop(next(iter(self._trees)))
            self._trees[savepoint] = tree
