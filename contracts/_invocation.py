"""Executor invocation: what the Host hands an executor and what comes back.

The wire form of both is the command-executor protocol of ``docs/executors.md``;
Python executors receive the same request as a model.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from contracts._custody import ArtifactRef
from contracts._delivery import ExecutorBinding
from contracts._errors import ErrorCode

PROTOCOL: Literal["execution-system/v1"] = "execution-system/v1"

LAUNCH_ENV = "EXECSYS_INVOCATION"
"""Environment variable every process of a command turn carries: the invocation id.

Recovery finds processes an interrupted attempt left behind by it."""

LAUNCHER_ENV = "EXECSYS_LAUNCHER"
"""Environment variable every process of a command turn carries beside :data:`LAUNCH_ENV`:
the dispatching runner process as ``<pid>:<start time>``.

An invocation id is the same in two stores that hold the same delivery, so recovery
kills only leftovers whose launcher is the one the attempt's launch record names."""


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class InvocationRequest(_Frozen):
    """One executor turn, exactly as materialized by the Host."""

    protocol: Literal["execution-system/v1"] = PROTOCOL
    """Protocol version."""
    delivery: str
    """The delivery id."""
    node: str
    """The action node."""
    activation: int
    """Which visit of the node."""
    invocation: str
    """The invocation id; the same for every turn of one action-input episode."""
    attempt: int
    """The attempt under the node's retry policy."""
    turn: int = 1
    """Turn within the episode (1, then +1 per answered question); with ``invocation``
    it is the idempotency key of this turn."""
    input: dict[str, Any]
    """Typed input materialized from committed state."""
    session: str | None = None
    """The executor's opaque session when continuing after an action-input."""
    response: Any = None
    """The answer to the executor's question when continuing."""

    def wire(self) -> dict[str, Any]:
        """The JSON object written to a command executor's stdin."""
        return self.model_dump(mode="json")


class Completed(_Frozen):
    """The executor finished the turn with outputs (a proposal, not yet committed)."""

    status: Literal["completed"] = "completed"
    """Discriminator."""
    output: dict[str, Any]
    """Port -> value."""
    artifacts: tuple[ArtifactRef, ...] = ()
    """Artifacts the turn produced; custody checks their digests."""


class NeedsInput(_Frozen):
    """The executor asks a question and will continue in the same session."""

    status: Literal["needs-input"] = "needs-input"
    """Discriminator."""
    question: Any
    """The question (any JSON value) shown to whoever answers."""
    session: str = Field(max_length=65536)
    """Opaque executor session to continue later."""


class Failed(_Frozen):
    """The turn failed."""

    status: Literal["failed"] = "failed"
    """Discriminator."""
    reason: str = Field(max_length=200)
    """A closed reason chosen by the executor (or a Host error code)."""
    retryable: bool = False
    """Whether the node's retry policy may retry it."""
    code: ErrorCode = ErrorCode.NODE_FAILED
    """How the Host classifies the failure."""
    detail: str = ""
    """One line for people; never interpreted."""
    unknown_outcome: bool = False
    """True when the executor's effect is unknown (e.g. it died mid-turn)."""


InvocationResult = Completed | NeedsInput | Failed
"""What one executor turn returns."""


class Invoker(Protocol):
    """Runs one executor turn; provided to the Host by the runner."""

    def __call__(
        self,
        request: InvocationRequest,
        binding: ExecutorBinding,
        *,
        capability: str,
        workspace: str | None,
    ) -> Awaitable[InvocationResult]:
        """Invoke ``binding`` for ``request``; never raises for executor misbehaviour."""
        ...
