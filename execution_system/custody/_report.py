"""What a snapshot reports."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from contracts import SavepointId


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
