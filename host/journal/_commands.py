"""The commands a writer sends to a journal.

Every command names its request id and the head it expects (optimistic
concurrency: a writer that saw an older head is refused, never rebased). Its
request digest covers the stable request content only, so retrying the very
same request later, at another time, is recognised as the same request.
"""

from __future__ import annotations

from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from contracts._ids import Digest
from contracts._journal import (
    ActivationRef,
    Actor,
    Approval,
    AttemptRef,
    Count,
    DigestField,
    ErrorInfo,
    NodeField,
    NodeState,
    RecordRef,
    SuccessorInfo,
    Token,
    Transition,
)
from host.journal._codec import (
    ENUM_VALUES,
    activation_fields,
    actor_fields,
    approval_fields,
    attempt_fields,
    dumps_canonical,
    error_fields,
    ref_fields,
    sha256_digest,
)

#: Fields that belong to the resulting record or to the moment of asking, not to the request.
_NOT_REQUEST_CONTENT = frozenset({"request", "expected_head", "at"})


class _Command(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    request: Token
    """The request id; repeating it with the same content is idempotent."""
    expected_head: DigestField
    """The head digest the writer last saw."""
    actor: Actor
    """Who asks."""
    at: AwareDatetime
    """When the resulting event(s) are recorded."""
    rationale: str = Field(default="", max_length=4096)
    """Free-text reason."""

    def request_content(self) -> dict[str, Any]:
        """The stable request content: command kind + fields, minus time/head/id."""
        content: dict[str, Any] = self.model_dump(mode="json", exclude=set(_NOT_REQUEST_CONTENT))
        content["command"] = type(self).__name__
        return content

    def request_digest(self) -> Digest:
        """Digest of the stable request content (command kind + fields, minus time/head/id)."""
        return sha256_digest(dumps_canonical(self.request_content()))


class AppendCommand(_Command):
    """Move one activation by one transition (every transition but the batch ones)."""

    node: NodeField
    """The node."""
    activation: Count = 1
    """Which activation; a loop revisit uses the node's next number."""
    expected_state: NodeState
    """The state the writer believes the activation is in."""
    transition: Transition
    """The transition asked for."""
    attempt: AttemptRef | None = None
    """The attempt (work-started/blocked/cleared/completed/failed)."""
    refs: tuple[RecordRef, ...] = ()
    """Referenced records (declared outputs, conduct record)."""
    authorization: RecordRef | None = None
    """A retry's explicit authorization."""
    approvals: tuple[Approval, ...] = ()
    """A completion's approvals."""
    error: ErrorInfo | None = None
    """Why work failed or blocked."""
    predecessors: tuple[ActivationRef, ...] = ()
    """For dependencies-satisfied: the completed activations that made this one ready."""

    def request_content(self) -> dict[str, Any]:
        """Same dict as the generic ``model_dump`` version, built field by field (hot path)."""
        if type(self) is not AppendCommand:
            return super().request_content()
        authorization = self.authorization
        return {
            "actor": actor_fields(self.actor),
            "rationale": self.rationale,
            "node": self.node,
            "activation": self.activation,
            "expected_state": ENUM_VALUES[self.expected_state],
            "transition": ENUM_VALUES[self.transition],
            "attempt": attempt_fields(self.attempt),
            "refs": [ref_fields(ref) for ref in self.refs],
            "authorization": None if authorization is None else ref_fields(authorization),
            "approvals": [approval_fields(approval) for approval in self.approvals],
            "error": error_fields(self.error),
            "predecessors": [activation_fields(ref) for ref in self.predecessors],
            "command": "AppendCommand",
        }


class InvalidateCommand(_Command):
    """Invalidate activations and, in the same batch, everything depending on them."""

    targets: tuple[ActivationRef, ...] = Field(min_length=1)
    """The activations the source record invalidates directly."""
    source: RecordRef
    """The record that causes the invalidation; must resolve."""
    policy: Token
    """The workflow's invalidation-policy reference."""
    affected: tuple[ActivationRef, ...] | None = None
    """The writer's own view of the affected set; refused unless it is the full closure."""


class BindSuccessorCommand(_Command):
    """Supersede invalidated activations by binding a successor execution."""

    activations: tuple[ActivationRef, ...] = Field(min_length=1)
    """Invalidated activations the successor replaces."""
    successor: SuccessorInfo
    """The successor execution and its header digest."""
