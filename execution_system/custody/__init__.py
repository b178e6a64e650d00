"""The real Workspace/Custody: content-addressed savepoints, signed capabilities, validation."""

from execution_system.custody._custody import FileCustody, SnapshotReport
from execution_system.custody._recovery import compare_heads

__all__ = ["FileCustody", "SnapshotReport", "compare_heads"]
