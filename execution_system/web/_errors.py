"""Error codes as HTTP statuses, and the one error body every failure uses.

The body is the CLI's ``--json`` error, ``{"error": {"code", "message", "path"}}``.
The status follows from the code alone, so a client can branch on either.
"""

from __future__ import annotations

from contracts import ErrorCode, ExecsysError, exit_status

_EXACT: dict[ErrorCode, int] = {
    ErrorCode.AUTH_REQUIRED: 401,
    ErrorCode.AUTH_TOKEN_UNKNOWN: 401,
    ErrorCode.AUTH_FORBIDDEN: 403,
    ErrorCode.CSRF_INVALID: 403,
    ErrorCode.ACTOR_NOT_ADMITTED: 403,
    ErrorCode.ROLE_NOT_ADMITTED: 403,
    ErrorCode.DELIVERY_NOT_FOUND: 404,
    ErrorCode.GOAL_NOT_FOUND: 404,
    ErrorCode.WEB_NOT_FOUND: 404,
    ErrorCode.WEB_METHOD_NOT_ALLOWED: 405,
    ErrorCode.INPUT_INVALID: 422,
    ErrorCode.AUTHORITY_INVALID: 422,
    ErrorCode.EXECUTOR_UNBOUND: 422,
    ErrorCode.WAIT_RESULT_INVALID: 422,
    ErrorCode.LEASE_HELD: 503,
    ErrorCode.STORE_ERROR: 503,
    ErrorCode.SUBSTRATE_ERROR: 503,
    ErrorCode.INTERNAL: 500,
}

#: Codes of a well-formed document whose meaning is refused: 422, not 400.
_UNPROCESSABLE = ("SPEC_", "GRAPH_", "DATAFLOW_", "SCHEMA_")


def http_status(code: ErrorCode) -> int:
    """The HTTP status of an error code (documented in docs/web.md)."""
    if code in _EXACT:
        return _EXACT[code]
    if code.value.startswith(_UNPROCESSABLE):
        return 422
    return 400 if exit_status(code) == 2 else 409


def error_body(exc: ExecsysError) -> dict[str, dict[str, str]]:
    """The JSON body of an error response."""
    return {"error": exc.to_json()}
