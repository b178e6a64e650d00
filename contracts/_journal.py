"""Records of the transition journal and the one table of node-state transitions.

The journal is an append-only, hash-chained log of what happened to the
*activations* of a control graph's nodes. A node that a loop revisits gets a
new activation (numbered from 1) instead of having its history rewritten, so a
journal state key is always ``(node, activation)``.

Two record types exist: one :class:`JournalHeader` (first line of every
journal) and :class:`JournalEvent` (one per transition). Both are plain frozen
data; the append rules, digests, codec and replay live in ``host.journal``.

Digest scheme (see ``docs/journal.md``): a record's digest is the SHA-256 of the
RFC 8785 canonical JSON of its fields; the stored line is the canonical JSON of
those fields plus one extra member ``digest`` holding that value. The digest
therefore never covers itself, and every line carries its own check value.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum, unique
from types import MappingProxyType
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts._ids import Digest, NodeId
from contracts._spec import NODE_ID_PATTERN

JOURNAL_FORMAT = "execution-system/journal/v1"
"""The value of ``format`` in every header this version writes and reads."""

#: Largest integer stored in a record: RFC 8785 numbers are IEEE doubles, so
#: integers beyond 2**53 - 1 would not survive canonicalisation exactly.
MAX_JOURNAL_INT = 2**53 - 1

_DIGEST = r"^sha256:[0-9a-f]{64}$"
#: Journal times are always UTC with microseconds, so one instant has one spelling.
_TIME = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$"

DigestField = Annotated[Digest, Field(pattern=_DIGEST)]
NodeField = Annotated[NodeId, Field(pattern=NODE_ID_PATTERN)]
Token = Annotated[str, Field(min_length=1, max_length=256)]
Count = Annotated[int, Field(ge=1, le=MAX_JOURNAL_INT)]


@unique
class NodeState(StrEnum):
    """The closed set of states a node activation can be in."""

    PENDING = "pending"
    READY = "ready"
    ACTIVE = "active"
    BLOCKED = "blocked"
    COMPLETED = "completed"
    FAILED = "failed"
    INVALIDATED = "invalidated"
    SUPERSEDED = "superseded"


@unique
class Transition(StrEnum):
    """The closed set of transitions an event may record."""

    DEPENDENCIES_SATISFIED = "dependencies-satisfied"
    WORK_STARTED = "work-started"
    WORK_BLOCKED = "work-blocked"
    BLOCK_CLEARED = "block-cleared"
    WORK_COMPLETED = "work-completed"
    WORK_FAILED = "work-failed"
    RETRY_AUTHORIZED = "retry-authorized"
    WORK_INVALIDATED = "work-invalidated"
    SUCCESSOR_BOUND = "successor-bound"


def _table() -> Mapping[tuple[NodeState, Transition], NodeState]:
    s, t = NodeState, Transition
    table = {
        (s.PENDING, t.DEPENDENCIES_SATISFIED): s.READY,
        (s.READY, t.WORK_STARTED): s.ACTIVE,
        (s.ACTIVE, t.WORK_BLOCKED): s.BLOCKED,
        (s.BLOCKED, t.BLOCK_CLEARED): s.ACTIVE,
        (s.ACTIVE, t.WORK_COMPLETED): s.COMPLETED,
        (s.ACTIVE, t.WORK_FAILED): s.FAILED,
        (s.FAILED, t.RETRY_AUTHORIZED): s.READY,
        (s.INVALIDATED, t.SUCCESSOR_BOUND): s.SUPERSEDED,
    }
    # Invalidation reaches every state that can still look current; the two
    # states it produces (invalidated, superseded) never resume.
    for prior in (s.PENDING, s.READY, s.ACTIVE, s.BLOCKED, s.COMPLETED, s.FAILED):
        table[(prior, t.WORK_INVALIDATED)] = s.INVALIDATED
    return MappingProxyType(table)


TRANSITIONS: Mapping[tuple[NodeState, Transition], NodeState] = _table()
"""The whole state machine: ``(prior state, transition) -> result state``.

A pair that is not a key is not admitted. This is the only place the machine is written.
"""


def next_state(prior: NodeState, transition: Transition) -> NodeState | None:
    """Return the state ``transition`` leads to from ``prior``, or None if not admitted."""
    return TRANSITIONS.get((prior, transition))


def format_time(moment: datetime) -> str:
    """Return the one journal spelling of ``moment`` (UTC, microseconds, ``Z``).

    A naive datetime is refused: a journal time must name an instant.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("journal times must be timezone-aware")
    u = moment if moment.tzinfo is UTC else moment.astimezone(UTC)
    if u.year < 1000:
        # The platform's own spelling (not four digits), which the schema refuses.
        return u.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    # Same characters as strftime("%Y-%m-%dT%H:%M:%S.%fZ") for years 1000-9999
    # (tests compare the two): ISO 8601 with microseconds, "+00:00" spelled "Z".
    return u.isoformat(timespec="microseconds")[:-6] + "Z"


@unique
class TaskKind(StrEnum):
    """Who performs a node's work."""

    AUTOMATED = "automated"
    HUMAN = "human"
    HYBRID = "hybrid"


@unique
class ActorKind(StrEnum):
    """What an actor is; only humans can hold roles."""

    AUTOMATION = "automation"
    HUMAN = "human"


class _Record(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class ArtifactDecl(_Record):
    """An artifact a node declares it produces, identified by kind and id (never a path)."""

    kind: Token
    """The artifact kind, e.g. ``port`` or ``conduct``."""
    id: Token
    """The artifact id, unique within its kind for this node."""


class ApprovalRequirement(_Record):
    """What a node's completion must carry in approvals."""

    roles: tuple[Token, ...] = Field(min_length=1)
    """Roles an approval may be given under; each approval names one of them."""
    min_count: Count = 1
    """The least number of approvals a completion must carry."""
    distinct_actors: bool = True
    """Whether each approval must come from a different actor."""


class NodeDecl(_Record):
    """One node of the compiled graph, as the journal needs to know it."""

    id: NodeField
    """The node id."""
    task: TaskKind = TaskKind.AUTOMATED
    """Who performs the node's work."""
    upstream: tuple[NodeField, ...] = ()
    """Nodes with an edge into this one; dependencies may only name these."""
    failure_upstream: tuple[NodeField, ...] = ()
    """Nodes whose *failure* leads here (a declared failure successor): a dependency on
    one of them is satisfied by its current failed activation."""
    artifacts: tuple[ArtifactDecl, ...] = ()
    """Artifacts every completion must reference by kind, id and digest."""
    roles: tuple[Token, ...] = ()
    """Roles admitted to perform a human or hybrid step of this node."""
    approval: ApprovalRequirement | None = None
    """Approvals a completion must carry; None when none are required."""


class Actor(_Record):
    """Who asked for a transition."""

    id: Token
    """The actor id (a runner, a service, a person)."""
    kind: ActorKind
    """Automation or human."""
    role: Token | None = None
    """The role a human acts under; automation never carries one."""


class RecordRef(_Record):
    """A stable reference to an external record: kind, id and content digest."""

    kind: Token
    """The record kind (artifact kind, ``conduct``, ``authorization``, ...)."""
    id: Token
    """The record id within its kind."""
    digest: DigestField
    """The digest of the record's content."""


class AttemptRef(_Record):
    """One attempt at an activation's work."""

    id: Token
    """The attempt id, unique within the activation."""
    sequence: Count
    """1-based; contiguous within the activation."""


class ActivationRef(_Record):
    """One activation of one node: the journal's state key."""

    node: NodeField
    """The node id."""
    activation: Count
    """1-based activation number; a loop revisit is the next number."""


class Approval(_Record):
    """One human approval attached to a completion."""

    actor: Token
    """The approving actor's id."""
    kind: ActorKind
    """Must be ``human``; automation cannot approve."""
    role: Token
    """The role the approval is given under."""
    record: RecordRef
    """The approval record itself."""


class ErrorInfo(_Record):
    """Why work failed or blocked."""

    code: Token
    """A stable error code."""
    message: str = Field(max_length=4096)
    """A one-sentence explanation."""


class Batch(_Record):
    """Position of an event inside a multi-event command (invalidation, successor binding).

    The batch is identified by the request id its events share.
    """

    index: Count
    """1-based position inside the batch."""
    size: Count
    """The number of events in the batch."""


class InvalidationInfo(_Record):
    """Why an activation was invalidated."""

    source: RecordRef
    """The independently resolvable record that caused the invalidation."""
    policy: Token
    """The invalidation-policy reference of the workflow that applied."""


class SuccessorInfo(_Record):
    """The execution that replaces an invalidated activation."""

    execution: Token
    """The successor execution id."""
    header: DigestField
    """The digest of the successor journal's header (its chain root)."""


class JournalHeader(_Record):
    """The first record of a journal; its digest is the chain root."""

    record: Literal["header"] = "header"
    """Record type discriminator."""
    format: Literal["execution-system/journal/v1"] = "execution-system/journal/v1"
    """Journal format version."""
    execution: Token
    """The execution (delivery) this journal belongs to."""
    authority: DigestField
    """Digest of the authority policy bound to the execution."""
    graph: DigestField
    """Digest of the compiled graph."""
    start: NodeField
    """The graph's start node: its first activation begins ``ready``."""
    nodes: tuple[NodeDecl, ...] = Field(min_length=1)
    """Every node of the graph."""
    created_by: Actor
    """The actor that created the execution."""
    time: Annotated[str, Field(pattern=_TIME)]
    """When the journal was created (see :func:`format_time`)."""


class JournalEvent(_Record):
    """One transition of one node activation."""

    record: Literal["event"] = "event"
    """Record type discriminator."""
    execution: Token
    """The execution this event belongs to (equal to the header's)."""
    ordinal: Count
    """1-based position in the journal; contiguous."""
    prior: DigestField
    """Digest of the previous record (the header for ordinal 1)."""
    request: Token
    """The request id; shared by every event of one batch."""
    request_digest: DigestField
    """Digest of the stable request content (never the time or expected head)."""
    node: NodeField
    """The node whose activation moves."""
    activation: Count
    """Which activation of ``node`` moves."""
    prior_state: NodeState
    """The activation's state before the event."""
    result_state: NodeState
    """The activation's state after the event (``TRANSITIONS[prior_state, transition]``)."""
    transition: Transition
    """The transition recorded."""
    actor: Actor
    """Who asked for it."""
    time: Annotated[str, Field(pattern=_TIME)]
    """When the event was recorded (see :func:`format_time`)."""
    rationale: str = Field(default="", max_length=4096)
    """Free-text reason; may be empty."""
    attempt: AttemptRef | None = None
    """The attempt bound by work-started/blocked/cleared/completed/failed."""
    refs: tuple[RecordRef, ...] = ()
    """Records the event references (outputs, conduct records)."""
    authorization: RecordRef | None = None
    """The explicit authorization of a retry (``retry-authorized`` only)."""
    approvals: tuple[Approval, ...] = ()
    """Approvals carried by a completion."""
    error: ErrorInfo | None = None
    """Why work failed or blocked."""
    predecessors: tuple[ActivationRef, ...] = ()
    """For ``dependencies-satisfied``: the activations whose completion made this one ready."""
    batch: Batch | None = None
    """Position inside a multi-event command; None for single events."""
    invalidation: InvalidationInfo | None = None
    """For ``work-invalidated``: source and policy."""
    successor: SuccessorInfo | None = None
    """For ``successor-bound``: the successor execution."""
