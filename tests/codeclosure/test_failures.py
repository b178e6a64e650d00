"""The one failure-class table and the run-status view (issue: failure classes)."""

from __future__ import annotations

import pytest

from contracts import ErrorCode
from execution_system.codeclosure import CLASS_OF, RUN_STATUS_OF, FailureClass, RunStatus
from execution_system.codeclosure._failures import classify
from execution_system.codeclosure._views import run_status


def test_every_failure_code_has_a_class_and_every_class_a_run_status():
    assert set(CLASS_OF.values()) <= set(RUN_STATUS_OF)
    assert set(RUN_STATUS_OF) == set(FailureClass)
    # A failure never reads as progress or success.
    assert set(RUN_STATUS_OF.values()) <= {RunStatus.BLOCKED, RunStatus.FAILED}


@pytest.mark.parametrize(
    ("failure", "status"),
    [
        (FailureClass.TRANSIENT_BACKEND, RunStatus.BLOCKED),
        (FailureClass.PROTOCOL_ERROR, RunStatus.FAILED),
        (FailureClass.ABRUPT_TERMINATION, RunStatus.BLOCKED),
        (FailureClass.POLICY_VIOLATION, RunStatus.FAILED),
        (FailureClass.SOURCE_DRIFT, RunStatus.FAILED),
        (FailureClass.ENGINE_ERROR, RunStatus.FAILED),
        (FailureClass.UNKNOWN_OUTCOME, RunStatus.BLOCKED),
    ],
)
def test_run_status_of_each_class(failure, status):
    assert RUN_STATUS_OF[failure] is status


@pytest.mark.parametrize(
    ("code", "failure"),
    [
        (ErrorCode.EXECUTOR_TIMEOUT, FailureClass.TRANSIENT_BACKEND),
        (ErrorCode.OUTPUT_UNDECLARED_PORT, FailureClass.PROTOCOL_ERROR),
        (ErrorCode.NODE_FAILED, FailureClass.PROTOCOL_ERROR),
        (ErrorCode.EXECUTOR_ABRUPT_TERMINATION, FailureClass.ABRUPT_TERMINATION),
        (ErrorCode.CUSTODY_PROTECTED_PATH, FailureClass.POLICY_VIOLATION),
        (ErrorCode.CUSTODY_WRITE_UNDER_READ, FailureClass.SOURCE_DRIFT),
        (ErrorCode.OPERATION_FAILED, FailureClass.ENGINE_ERROR),
        (ErrorCode.INTERVENTION_REQUIRED, FailureClass.UNKNOWN_OUTCOME),
    ],
)
def test_classify_known_codes(code, failure):
    assert CLASS_OF[code] is failure
    assert classify(code.value) is failure


# The whole table, code -> (class, run status), written out once by hand: a change
# to any entry of CLASS_OF or RUN_STATUS_OF must be made here too, on purpose.
GOLDEN: dict[str, tuple[str, str]] = {
    "EXECUTOR_TIMEOUT": ("TRANSIENT_BACKEND", "BLOCKED"),
    "EXECUTOR_START_FAILED": ("TRANSIENT_BACKEND", "BLOCKED"),
    "EXECUTOR_IMPORT_FAILED": ("TRANSIENT_BACKEND", "BLOCKED"),
    "RETRIES_EXHAUSTED": ("TRANSIENT_BACKEND", "BLOCKED"),
    "EXECUTOR_PROTOCOL_ERROR": ("PROTOCOL_ERROR", "FAILED"),
    "NODE_FAILED": ("PROTOCOL_ERROR", "FAILED"),
    "OUTPUT_SCHEMA_VIOLATION": ("PROTOCOL_ERROR", "FAILED"),
    "OUTPUT_MISSING_PORT": ("PROTOCOL_ERROR", "FAILED"),
    "OUTPUT_UNDECLARED_PORT": ("PROTOCOL_ERROR", "FAILED"),
    "EXECUTOR_RAISED": ("PROTOCOL_ERROR", "FAILED"),
    "EXECUTOR_ABRUPT_TERMINATION": ("ABRUPT_TERMINATION", "BLOCKED"),
    "CUSTODY_PROTECTED_PATH": ("POLICY_VIOLATION", "FAILED"),
    "CUSTODY_WRITE_OUTSIDE_PATHS": ("POLICY_VIOLATION", "FAILED"),
    "CUSTODY_SYMLINK_ESCAPE": ("POLICY_VIOLATION", "FAILED"),
    "CUSTODY_SPECIAL_FILE": ("POLICY_VIOLATION", "FAILED"),
    "CUSTODY_PATH_TRAVERSAL": ("POLICY_VIOLATION", "FAILED"),
    "CUSTODY_WRITE_UNDER_READ": ("SOURCE_DRIFT", "FAILED"),
    "OPERATION_FAILED": ("ENGINE_ERROR", "FAILED"),
    "MAX_VISITS_EXCEEDED": ("ENGINE_ERROR", "FAILED"),
    "INTERVENTION_REQUIRED": ("UNKNOWN_OUTCOME", "BLOCKED"),
}


def test_the_whole_failure_table_matches_the_golden_copy():
    found = {
        code.value: (failure.value, RUN_STATUS_OF[failure].value)
        for code, failure in CLASS_OF.items()
    }
    assert found == GOLDEN


@pytest.mark.parametrize("code", sorted(GOLDEN))
def test_each_failure_code_reads_as_its_run_status(code):
    failure, status = GOLDEN[code]
    found, detail = run_status("STARTED", "failed", "NODE_FAILED", code)
    assert (found.value, detail) == (status, f"{failure} ({code})")


def test_classify_unknown_and_absent_codes():
    assert classify(None) is None
    assert classify("not-an-error-code") is None
    # A catalogued code outside the table is an engine error, never success.
    outside = next(c for c in ErrorCode if c not in CLASS_OF)
    assert classify(outside.value) is FailureClass.ENGINE_ERROR


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (("READY", None, None, None), RunStatus.READY),
        (("STARTED", "running", None, None), RunStatus.RUNNING),
        (("STARTED", "suspended", None, None), RunStatus.WAITING_FOR_INPUT),
        (("STARTED", "waiting", None, None), RunStatus.WAITING_FOR_INPUT),
        (("STARTED", "stopped", None, None), RunStatus.BLOCKED),
        (("STARTED", "intervention", None, None), RunStatus.BLOCKED),
        (("STARTED", "completed", "succeeded", None), RunStatus.CLOSED),
        (("STARTED", "failed", "blocked", None), RunStatus.BLOCKED),
        (("STARTED", "failed", "failed", None), RunStatus.FAILED),
        (("STARTED", "failed", "NODE_FAILED", "EXECUTOR_TIMEOUT"), RunStatus.BLOCKED),
        (("STARTED", "failed", "NODE_FAILED", "OUTPUT_UNDECLARED_PORT"), RunStatus.FAILED),
        (("STARTED", "failed", "NODE_FAILED", "EXECUTOR_ABRUPT_TERMINATION"), RunStatus.BLOCKED),
        (("STARTED", "failed", "CUSTODY_PROTECTED_PATH", None), RunStatus.FAILED),
        (("STARTED", "failed", "INTERVENTION_REQUIRED", None), RunStatus.BLOCKED),
        # cancellation wins over everything, and is never CLOSED
        (("CANCELLED", None, None, None), RunStatus.CANCELLED),
        (("CANCELLED", "completed", "succeeded", None), RunStatus.CANCELLED),
        (("STARTED", "cancelled", None, None), RunStatus.CANCELLED),
        (("CANCELLED", "suspended", None, None), RunStatus.CANCELLED),
    ],
)
def test_run_status(args, status):
    found, detail = run_status(*args)
    assert found is status
    assert detail


def test_run_status_names_the_failure_class():
    status, detail = run_status("STARTED", "failed", "NODE_FAILED", "CUSTODY_PROTECTED_PATH")
    assert status is RunStatus.FAILED
    assert detail == "POLICY_VIOLATION (CUSTODY_PROTECTED_PATH)"
