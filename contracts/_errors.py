"""The error catalogue: one closed set of stable codes and one exception root.

Every refusal the product makes carries an :class:`ErrorCode`, the path of the
element it refers to (a dotted path into a spec, a delivery id, a file path, a
journal ordinal) and what was expected there. Codes are part of the public
contract: they are never renamed or reused for another meaning.

Exception tree::

    ExecsysError                  root; carries code, path, expected
    ├── UsageError                the request itself is malformed (exit 2)
    └── RefusedError              a well-formed request the system refuses (exit 1)

Which of the two a code belongs to is decided once, by :func:`exit_status`.
"""

from __future__ import annotations

from enum import StrEnum, unique


@unique
class ErrorCode(StrEnum):
    """Stable error codes; the value is what users and scripts see."""

    # --- input files and usage -------------------------------------------------
    USAGE = "USAGE"
    FILE_NOT_FOUND = "FILE_NOT_FOUND"
    FILE_TOO_LARGE = "FILE_TOO_LARGE"
    FILE_NOT_TEXT = "FILE_NOT_TEXT"
    FILE_EMPTY = "FILE_EMPTY"
    PARSE_ERROR = "PARSE_ERROR"
    DOCUMENT_TOO_DEEP = "DOCUMENT_TOO_DEEP"
    DUPLICATE_KEY = "DUPLICATE_KEY"
    YAML_ALIAS_REFUSED = "YAML_ALIAS_REFUSED"

    # --- spec shape (pydantic level) ------------------------------------------
    SPEC_NOT_A_MAPPING = "SPEC_NOT_A_MAPPING"
    SPEC_UNKNOWN_KEY = "SPEC_UNKNOWN_KEY"
    SPEC_MISSING_KEY = "SPEC_MISSING_KEY"
    SPEC_INVALID_VALUE = "SPEC_INVALID_VALUE"
    SPEC_UNKNOWN_VERSION = "SPEC_UNKNOWN_VERSION"
    SPEC_UNKNOWN_NODE_KIND = "SPEC_UNKNOWN_NODE_KIND"
    SPEC_INVALID_NODE_ID = "SPEC_INVALID_NODE_ID"
    SPEC_INVALID_REFERENCE = "SPEC_INVALID_REFERENCE"

    # --- graph semantics (admission) ------------------------------------------
    GRAPH_UNDECLARED_START = "GRAPH_UNDECLARED_START"
    GRAPH_UNDECLARED_SUCCESSOR = "GRAPH_UNDECLARED_SUCCESSOR"
    GRAPH_MISSING_SUCCESSOR = "GRAPH_MISSING_SUCCESSOR"
    GRAPH_AMBIGUOUS_SUCCESSOR = "GRAPH_AMBIGUOUS_SUCCESSOR"
    GRAPH_ROUTE_PORT_UNDECLARED = "GRAPH_ROUTE_PORT_UNDECLARED"
    GRAPH_ROUTE_PORT_NOT_ENUM = "GRAPH_ROUTE_PORT_NOT_ENUM"
    GRAPH_ROUTE_NOT_COVERED = "GRAPH_ROUTE_NOT_COVERED"
    GRAPH_ROUTE_UNKNOWN_CASE = "GRAPH_ROUTE_UNKNOWN_CASE"
    GRAPH_UNDECLARED_BRANCH = "GRAPH_UNDECLARED_BRANCH"
    GRAPH_DUPLICATE_BRANCH = "GRAPH_DUPLICATE_BRANCH"
    GRAPH_SELECT_INVALID = "GRAPH_SELECT_INVALID"
    GRAPH_REQUIRED_NOT_BRANCH = "GRAPH_REQUIRED_NOT_BRANCH"
    GRAPH_BARRIER_MISMATCH = "GRAPH_BARRIER_MISMATCH"
    GRAPH_BRANCH_ESCAPES = "GRAPH_BRANCH_ESCAPES"
    GRAPH_NESTED_PARALLEL = "GRAPH_NESTED_PARALLEL"
    GRAPH_UNBOUNDED_CYCLE = "GRAPH_UNBOUNDED_CYCLE"
    GRAPH_UNREACHABLE_NODE = "GRAPH_UNREACHABLE_NODE"
    GRAPH_NO_TERMINAL = "GRAPH_NO_TERMINAL"
    GRAPH_INVALID_FAILURE_TARGET = "GRAPH_INVALID_FAILURE_TARGET"
    GRAPH_RESERVED_NODE_ID = "GRAPH_RESERVED_NODE_ID"
    GRAPH_WORKSPACE_PATHS_INVALID = "GRAPH_WORKSPACE_PATHS_INVALID"
    GRAPH_UNKNOWN_OPERATION = "GRAPH_UNKNOWN_OPERATION"
    DATAFLOW_UNKNOWN_NODE = "DATAFLOW_UNKNOWN_NODE"
    DATAFLOW_UNKNOWN_PORT = "DATAFLOW_UNKNOWN_PORT"
    DATAFLOW_UNKNOWN_INPUT = "DATAFLOW_UNKNOWN_INPUT"
    DATAFLOW_NOT_GUARANTEED = "DATAFLOW_NOT_GUARANTEED"

    # --- JSON Schemas inside a spec -------------------------------------------
    SCHEMA_UNKNOWN_KEYWORD = "SCHEMA_UNKNOWN_KEYWORD"
    SCHEMA_UNSUPPORTED_KEYWORD = "SCHEMA_UNSUPPORTED_KEYWORD"
    SCHEMA_INVALID = "SCHEMA_INVALID"

    # --- delivery admission ---------------------------------------------------
    INPUT_INVALID = "INPUT_INVALID"
    AUTHORITY_INVALID = "AUTHORITY_INVALID"
    CONFIG_INVALID = "CONFIG_INVALID"
    EXECUTOR_UNBOUND = "EXECUTOR_UNBOUND"
    STORE_URL_INVALID = "STORE_URL_INVALID"
    ENGINE_UNKNOWN = "ENGINE_UNKNOWN"

    # --- host: run time -------------------------------------------------------
    HOST_CREATION_FAILED = "HOST_CREATION_FAILED"
    DELIVERY_NOT_FOUND = "DELIVERY_NOT_FOUND"
    DELIVERY_EXISTS = "DELIVERY_EXISTS"
    DELIVERY_NOT_RUNNABLE = "DELIVERY_NOT_RUNNABLE"
    DELIVERY_RETIRED = "DELIVERY_RETIRED"
    LEASE_HELD = "LEASE_HELD"
    LEASE_FENCED = "LEASE_FENCED"
    OUTPUT_SCHEMA_VIOLATION = "OUTPUT_SCHEMA_VIOLATION"
    OUTPUT_UNDECLARED_PORT = "OUTPUT_UNDECLARED_PORT"
    OUTPUT_MISSING_PORT = "OUTPUT_MISSING_PORT"
    ROUTE_VALUE_UNDECLARED = "ROUTE_VALUE_UNDECLARED"
    SELECTION_UNDECLARED = "SELECTION_UNDECLARED"
    SELECTION_EMPTY = "SELECTION_EMPTY"
    SELECTION_DUPLICATE = "SELECTION_DUPLICATE"
    SELECTION_STALE = "SELECTION_STALE"
    SELECTION_MISSING_REQUIRED = "SELECTION_MISSING_REQUIRED"
    INPUT_UNAVAILABLE = "INPUT_UNAVAILABLE"
    MAX_VISITS_EXCEEDED = "MAX_VISITS_EXCEEDED"
    NODE_FAILED = "NODE_FAILED"
    REQUIRED_BRANCH_FAILED = "REQUIRED_BRANCH_FAILED"
    RETRIES_EXHAUSTED = "RETRIES_EXHAUSTED"
    EXECUTOR_PROTOCOL_ERROR = "EXECUTOR_PROTOCOL_ERROR"
    EXECUTOR_TIMEOUT = "EXECUTOR_TIMEOUT"
    EXECUTOR_ABRUPT_TERMINATION = "EXECUTOR_ABRUPT_TERMINATION"
    EXECUTOR_START_FAILED = "EXECUTOR_START_FAILED"
    EXECUTOR_IMPORT_FAILED = "EXECUTOR_IMPORT_FAILED"
    EXECUTOR_RAISED = "EXECUTOR_RAISED"
    OPERATION_FAILED = "OPERATION_FAILED"
    SIBLING_STOPPED = "SIBLING_STOPPED"
    STORE_ERROR = "STORE_ERROR"
    SUBSTRATE_ERROR = "SUBSTRATE_ERROR"
    INTERVENTION_REQUIRED = "INTERVENTION_REQUIRED"

    # --- suspensions, directives, stop, retirement -----------------------------
    CORRELATION_UNKNOWN = "CORRELATION_UNKNOWN"
    CORRELATION_STALE = "CORRELATION_STALE"
    CORRELATION_USED = "CORRELATION_USED"
    SUSPENSION_KIND_MISMATCH = "SUSPENSION_KIND_MISMATCH"
    WAIT_NOT_PENDING = "WAIT_NOT_PENDING"
    WAIT_RESULT_INVALID = "WAIT_RESULT_INVALID"
    ACTOR_NOT_ADMITTED = "ACTOR_NOT_ADMITTED"
    ROLE_NOT_ADMITTED = "ROLE_NOT_ADMITTED"
    APPROVAL_DUPLICATE_ACTOR = "APPROVAL_DUPLICATE_ACTOR"
    DIRECTIVE_NOT_APPLICABLE = "DIRECTIVE_NOT_APPLICABLE"
    SAVEPOINT_UNKNOWN = "SAVEPOINT_UNKNOWN"
    STATE_MISMATCH = "STATE_MISMATCH"
    STOP_NOT_APPLICABLE = "STOP_NOT_APPLICABLE"
    STOP_REQUESTED = "STOP_REQUESTED"
    RETIRE_NOT_APPLICABLE = "RETIRE_NOT_APPLICABLE"
    RETIRE_AUTHORIZATION_CONFLICT = "RETIRE_AUTHORIZATION_CONFLICT"

    # --- custody ----------------------------------------------------------------
    CAPABILITY_BAD_SIGNATURE = "CAPABILITY_BAD_SIGNATURE"
    CAPABILITY_MALFORMED = "CAPABILITY_MALFORMED"
    CAPABILITY_WRONG_DELIVERY = "CAPABILITY_WRONG_DELIVERY"
    CAPABILITY_WRONG_SITE = "CAPABILITY_WRONG_SITE"
    CAPABILITY_WRONG_INVOCATION = "CAPABILITY_WRONG_INVOCATION"
    CAPABILITY_EXPIRED = "CAPABILITY_EXPIRED"
    CAPABILITY_REPLAYED = "CAPABILITY_REPLAYED"
    CAPABILITY_STALE_BASE = "CAPABILITY_STALE_BASE"
    CUSTODY_WRITE_UNDER_READ = "CUSTODY_WRITE_UNDER_READ"
    CUSTODY_WRITE_OUTSIDE_PATHS = "CUSTODY_WRITE_OUTSIDE_PATHS"
    CUSTODY_PROTECTED_PATH = "CUSTODY_PROTECTED_PATH"
    CUSTODY_SYMLINK_ESCAPE = "CUSTODY_SYMLINK_ESCAPE"
    CUSTODY_SPECIAL_FILE = "CUSTODY_SPECIAL_FILE"
    CUSTODY_PATH_TRAVERSAL = "CUSTODY_PATH_TRAVERSAL"
    CUSTODY_ARTIFACT_MISMATCH = "CUSTODY_ARTIFACT_MISMATCH"
    CUSTODY_REJECTED = "CUSTODY_REJECTED"
    CUSTODY_RESTORE_UNCERTAIN = "CUSTODY_RESTORE_UNCERTAIN"
    CUSTODY_SAVEPOINT_UNKNOWN = "CUSTODY_SAVEPOINT_UNKNOWN"
    CUSTODY_HEAD_MISMATCH = "CUSTODY_HEAD_MISMATCH"
    CUSTODY_SEED_INVALID = "CUSTODY_SEED_INVALID"
    CUSTODY_KEY_INVALID = "CUSTODY_KEY_INVALID"
    CUSTODY_WORKSPACE_UNKNOWN = "CUSTODY_WORKSPACE_UNKNOWN"

    # --- journal ---------------------------------------------------------------
    JOURNAL_STALE_HEAD = "JOURNAL_STALE_HEAD"
    JOURNAL_PRIOR_STATE_MISMATCH = "JOURNAL_PRIOR_STATE_MISMATCH"
    JOURNAL_INVALID_TRANSITION = "JOURNAL_INVALID_TRANSITION"
    JOURNAL_UNKNOWN_NODE = "JOURNAL_UNKNOWN_NODE"
    JOURNAL_DEPENDENCY_GAP = "JOURNAL_DEPENDENCY_GAP"
    JOURNAL_REQUEST_CONFLICT = "JOURNAL_REQUEST_CONFLICT"
    JOURNAL_ATTEMPT_INVALID = "JOURNAL_ATTEMPT_INVALID"
    JOURNAL_RETRY_UNAUTHORIZED = "JOURNAL_RETRY_UNAUTHORIZED"
    JOURNAL_MISSING_OUTPUT = "JOURNAL_MISSING_OUTPUT"
    JOURNAL_ACTOR_REQUIRED = "JOURNAL_ACTOR_REQUIRED"
    JOURNAL_FORGED_ROLE = "JOURNAL_FORGED_ROLE"
    JOURNAL_AUTOMATION_CLAIMS_HUMAN = "JOURNAL_AUTOMATION_CLAIMS_HUMAN"
    JOURNAL_APPROVAL_INVALID = "JOURNAL_APPROVAL_INVALID"
    JOURNAL_UNVERIFIED_AUTHORITY = "JOURNAL_UNVERIFIED_AUTHORITY"
    JOURNAL_PARTIAL_INVALIDATION = "JOURNAL_PARTIAL_INVALIDATION"
    JOURNAL_INVALIDATION_SOURCE = "JOURNAL_INVALIDATION_SOURCE"
    JOURNAL_BAD_SUCCESSOR = "JOURNAL_BAD_SUCCESSOR"
    JOURNAL_UNKNOWN_FIELD = "JOURNAL_UNKNOWN_FIELD"
    JOURNAL_MALFORMED_RECORD = "JOURNAL_MALFORMED_RECORD"
    JOURNAL_NONCANONICAL = "JOURNAL_NONCANONICAL"
    JOURNAL_DIGEST_MISMATCH = "JOURNAL_DIGEST_MISMATCH"
    JOURNAL_CHAIN_BROKEN = "JOURNAL_CHAIN_BROKEN"
    JOURNAL_ORDINAL_GAP = "JOURNAL_ORDINAL_GAP"
    JOURNAL_DUPLICATE_EVENT = "JOURNAL_DUPLICATE_EVENT"
    JOURNAL_FOREIGN_RECORD = "JOURNAL_FOREIGN_RECORD"
    JOURNAL_MISSING_HEADER = "JOURNAL_MISSING_HEADER"
    JOURNAL_EMPTY = "JOURNAL_EMPTY"
    JOURNAL_CHECKPOINT_MISMATCH = "JOURNAL_CHECKPOINT_MISMATCH"
    JOURNAL_ACTIVATION_INVALID = "JOURNAL_ACTIVATION_INVALID"

    # --- CodeClosure -------------------------------------------------------------
    GOAL_NOT_FOUND = "GOAL_NOT_FOUND"
    GOAL_INVALID = "GOAL_INVALID"
    GOAL_STALE_VERSION = "GOAL_STALE_VERSION"
    GOAL_ILLEGAL_TRANSITION = "GOAL_ILLEGAL_TRANSITION"
    GOAL_NOT_ACCEPTED = "GOAL_NOT_ACCEPTED"
    GOAL_MANIFEST_MISMATCH = "GOAL_MANIFEST_MISMATCH"
    GOAL_PROTECTED_PATH = "GOAL_PROTECTED_PATH"
    GOAL_SOURCE_DRIFT = "GOAL_SOURCE_DRIFT"
    GOAL_CANCELLED = "GOAL_CANCELLED"
    PATCH_DOES_NOT_APPLY = "PATCH_DOES_NOT_APPLY"
    CHECK_CANNOT_START = "CHECK_CANNOT_START"
    CHECK_NOT_CANDIDATE = "CHECK_NOT_CANDIDATE"
    GOAL_FAILED = "GOAL_FAILED"
    GOAL_BLOCKED = "GOAL_BLOCKED"
    WORKER_EVENT_CONFLICT = "WORKER_EVENT_CONFLICT"

    # --- last resort -------------------------------------------------------------
    INTERNAL = "INTERNAL"


#: Codes that describe a malformed request (exit status 2). All others are
#: refusals or failures of a well-formed request (exit status 1).
_USAGE_CODES: frozenset[ErrorCode] = frozenset(
    code
    for code in ErrorCode
    if code.value.startswith(
        (
            "USAGE",
            "FILE_",
            "PARSE_",
            "DOCUMENT_",
            "DUPLICATE_KEY",
            "YAML_",
            "SPEC_",
            "GRAPH_",
            "DATAFLOW_",
            "SCHEMA_",
            "INPUT_INVALID",
            "AUTHORITY_INVALID",
            "CONFIG_INVALID",
            "EXECUTOR_UNBOUND",
            "STORE_URL_INVALID",
            "ENGINE_UNKNOWN",
            "GOAL_INVALID",
        )
    )
)


def exit_status(code: ErrorCode) -> int:
    """Return the process exit status the CLI uses for ``code`` (1 or 2)."""
    return 2 if code in _USAGE_CODES else 1


class ExecsysError(Exception):
    """Root of every error the product raises on purpose."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        path: str = "",
        expected: str = "",
    ) -> None:
        super().__init__(message)
        self.code = code
        """The stable code."""
        self.message = message
        """What happened, in one sentence."""
        self.path = path
        """Where: a dotted path into the document, a delivery id, a file or an ordinal."""
        self.expected = expected
        """What was expected at ``path``; empty when the code says it all."""

    def one_line(self) -> str:
        """Render the error as the single line the CLI prints."""
        where = f" at {self.path}" if self.path else ""
        wanted = f" (expected {self.expected})" if self.expected else ""
        text = f"{self.code.value}{where}: {self.message}{wanted}"
        return " ".join(text.split())

    def to_json(self) -> dict[str, str]:
        """Render the error as the ``{"code", "message", "path"}`` object of ``--json``."""
        message = self.message + (f" (expected {self.expected})" if self.expected else "")
        return {"code": self.code.value, "message": " ".join(message.split()), "path": self.path}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.one_line()!r})"


class UsageError(ExecsysError):
    """A request, document or configuration that is malformed."""


class RefusedError(ExecsysError):
    """A well-formed request that the system refuses or could not carry out."""


def error(code: ErrorCode, message: str, *, path: str = "", expected: str = "") -> ExecsysError:
    """Build the right subclass for ``code``."""
    cls = UsageError if exit_status(code) == 2 else RefusedError
    return cls(code, message, path=path, expected=expected)
