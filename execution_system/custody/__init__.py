"""The real Workspace/Custody: content-addressed savepoints, signed capabilities, validation."""

from execution_system.custody._custody import FileCustody
from execution_system.custody._recovery import compare_heads
from execution_system.custody._report import PruneReport, SnapshotReport
from execution_system.custody._tree import DEFAULT_EXCLUDED, protected_by

__all__ = [
    "DEFAULT_EXCLUDED",
    "FileCustody",
    "PruneReport",
    "SnapshotReport",
    "compare_heads",
    "protected_by",
]
