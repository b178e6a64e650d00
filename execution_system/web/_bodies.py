"""Request bodies of the mutating API calls: closed models, unknown keys refused."""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request

from contracts import CorrelationId, ErrorCode, NodeId, SavepointId, error, validation_message
from execution_system._loading import MAX_DOCUMENT_BYTES, parse_document

_Text = Field(min_length=1, max_length=256)


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


T = TypeVar("T", bound=_Body)


class AdmitBody(_Body):
    """``POST /deliveries``."""

    spec: dict[str, Any]
    """The control-graph spec, as a JSON object."""
    input: dict[str, Any] = Field(default_factory=dict)
    """The delivery input."""
    authority: dict[str, Any] | None = None
    """The authority policy (``actors``, ``approver``)."""
    key: str | None = Field(default=None, min_length=1, max_length=256)
    """Idempotency key: the same spec, input and key name the same delivery."""
    queue: bool | None = None
    """Leave the work to the fleet (``true``), run it here (``false``); by default queued
    exactly when a live ``serve`` runner serves the store."""


class AnswerBody(_Body):
    """``POST /deliveries/{id}/input``."""

    correlation: CorrelationId = _Text
    """The question's correlation id."""
    response: Any
    """The answer."""
    queue: bool | None = None
    """Leave the work to the fleet (``true``), run it here (``false``); by default queued
    exactly when a live ``serve`` runner serves the store."""


class ResolveBody(_Body):
    """``POST /deliveries/{id}/resolve`` (the actor is the token's)."""

    node: NodeId = _Text
    """The wait node."""
    role: str = _Text
    """The role the actor resolves under."""
    result: Any
    """The control result."""
    queue: bool | None = None
    """Leave the work to the fleet (``true``), run it here (``false``); by default queued
    exactly when a live ``serve`` runner serves the store."""


class RecoverBody(_Body):
    """``POST /deliveries/{id}/recover``."""

    directive: Literal["continue", "restart-from-savepoint", "intervene"]
    """What to do."""
    reason: str = Field(min_length=1, max_length=2000)
    """Why (journaled)."""
    savepoint: SavepointId | None = Field(default=None, min_length=1, max_length=256)
    """restart-from-savepoint: which one."""
    node: NodeId | None = Field(default=None, min_length=1, max_length=256)
    """intervene: the blocked node."""
    result: Any = None
    """intervene: the node's outputs."""
    fail: bool = False
    """intervene: mark the node failed instead."""
    queue: bool | None = None
    """Leave the work to the fleet (``true``), run it here (``false``); by default queued
    exactly when a live ``serve`` runner serves the store."""


class StopBody(_Body):
    """``POST /deliveries/{id}/stop`` (the body may be empty)."""

    wait_s: float = Field(default=30.0, ge=0.0, le=300.0)
    """How long to wait for a running delivery to reach a safe boundary."""


class RetireBody(_Body):
    """``POST /deliveries/{id}/retire``."""

    authorization: str = _Text
    """The operator's authorization id (recorded in the retirement fact)."""


async def read_body(request: Request, model: type[T], *, empty_ok: bool = False) -> T:
    """Parse the request's JSON body into ``model``; malformed ones are USAGE errors."""
    data = b""
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_DOCUMENT_BYTES:
            raise error(
                ErrorCode.FILE_TOO_LARGE,
                "request body is too large",
                path="body",
                expected=f"at most {MAX_DOCUMENT_BYTES} bytes",
            )
    document: Any = (
        {} if empty_ok and not data.strip() else parse_document(data, name="body", json_only=True)
    )
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise error(
            ErrorCode.USAGE,
            validation_message(first["msg"]),
            path=f"body.{where}" if where else "body",
            expected="a JSON object as described in /api/v1/openapi.json",
        ) from None


def check_recover(body: RecoverBody) -> None:
    """The same cross-field rules as ``execsys recover``."""
    if body.directive == "restart-from-savepoint" and not body.savepoint:
        raise error(
            ErrorCode.USAGE,
            "restart-from-savepoint needs a savepoint",
            path="body.savepoint",
            expected="a savepoint listed by inspect",
        )
    if body.directive == "intervene" and (not body.node or (body.result is None and not body.fail)):
        raise error(
            ErrorCode.USAGE,
            "intervene needs a node and a result or fail",
            path="body.node",
            expected='{"node": NODE, "result": {...}} or {"node": NODE, "fail": true}',
        )
