"""Failure classes and the run status each one leaves a goal in: one table, one place.

Worker and check failures arrive as stable error codes; the runtime maps
each to a closed failure class, and each class to exactly one run status.
"""

from __future__ import annotations

from enum import StrEnum, unique

from contracts import ErrorCode


@unique
class FailureClass(StrEnum):
    """Why a phase could not finish."""

    TRANSIENT_BACKEND = "TRANSIENT_BACKEND"
    PROTOCOL_ERROR = "PROTOCOL_ERROR"
    ABRUPT_TERMINATION = "ABRUPT_TERMINATION"
    POLICY_VIOLATION = "POLICY_VIOLATION"
    SOURCE_DRIFT = "SOURCE_DRIFT"
    ENGINE_ERROR = "ENGINE_ERROR"
    UNKNOWN_OUTCOME = "UNKNOWN_OUTCOME"


@unique
class RunStatus(StrEnum):
    """Whether the goal's current phase can make progress (not which phase it is)."""

    READY = "READY"
    RUNNING = "RUNNING"
    WAITING_FOR_INPUT = "WAITING_FOR_INPUT"
    BLOCKED = "BLOCKED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    CLOSED = "CLOSED"


CLASS_OF: dict[ErrorCode, FailureClass] = {
    ErrorCode.EXECUTOR_TIMEOUT: FailureClass.TRANSIENT_BACKEND,
    ErrorCode.EXECUTOR_START_FAILED: FailureClass.TRANSIENT_BACKEND,
    ErrorCode.EXECUTOR_IMPORT_FAILED: FailureClass.TRANSIENT_BACKEND,
    ErrorCode.RETRIES_EXHAUSTED: FailureClass.TRANSIENT_BACKEND,
    ErrorCode.EXECUTOR_PROTOCOL_ERROR: FailureClass.PROTOCOL_ERROR,
    ErrorCode.NODE_FAILED: FailureClass.PROTOCOL_ERROR,
    ErrorCode.OUTPUT_SCHEMA_VIOLATION: FailureClass.PROTOCOL_ERROR,
    ErrorCode.OUTPUT_MISSING_PORT: FailureClass.PROTOCOL_ERROR,
    ErrorCode.OUTPUT_UNDECLARED_PORT: FailureClass.PROTOCOL_ERROR,
    ErrorCode.EXECUTOR_RAISED: FailureClass.PROTOCOL_ERROR,
    ErrorCode.EXECUTOR_ABRUPT_TERMINATION: FailureClass.ABRUPT_TERMINATION,
    ErrorCode.CUSTODY_PROTECTED_PATH: FailureClass.POLICY_VIOLATION,
    ErrorCode.CUSTODY_WRITE_OUTSIDE_PATHS: FailureClass.POLICY_VIOLATION,
    ErrorCode.CUSTODY_SYMLINK_ESCAPE: FailureClass.POLICY_VIOLATION,
    ErrorCode.CUSTODY_SPECIAL_FILE: FailureClass.POLICY_VIOLATION,
    ErrorCode.CUSTODY_PATH_TRAVERSAL: FailureClass.POLICY_VIOLATION,
    ErrorCode.CUSTODY_WRITE_UNDER_READ: FailureClass.SOURCE_DRIFT,
    ErrorCode.OPERATION_FAILED: FailureClass.ENGINE_ERROR,
    ErrorCode.MAX_VISITS_EXCEEDED: FailureClass.ENGINE_ERROR,
    ErrorCode.INTERVENTION_REQUIRED: FailureClass.UNKNOWN_OUTCOME,
}
"""Every failure code a CodeClosure phase can end with, and its class."""

RUN_STATUS_OF: dict[FailureClass, RunStatus] = {
    FailureClass.TRANSIENT_BACKEND: RunStatus.BLOCKED,  # a retry needs explicit authority
    FailureClass.PROTOCOL_ERROR: RunStatus.FAILED,
    FailureClass.ABRUPT_TERMINATION: RunStatus.BLOCKED,  # pending reconciliation
    FailureClass.POLICY_VIOLATION: RunStatus.FAILED,
    FailureClass.SOURCE_DRIFT: RunStatus.FAILED,
    FailureClass.ENGINE_ERROR: RunStatus.FAILED,
    FailureClass.UNKNOWN_OUTCOME: RunStatus.BLOCKED,
}
"""The one mapping from failure class to run status."""


def classify(code: str | None) -> FailureClass | None:
    """The failure class of a stable code (None when it is not a failure code)."""
    if code is None:
        return None
    try:
        return CLASS_OF.get(ErrorCode(code), FailureClass.ENGINE_ERROR)
    except ValueError:
        return None
