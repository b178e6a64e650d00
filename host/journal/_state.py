"""The replay state: what the events so far say about every node activation.

This state is never stored. A journal builds it by replaying its events, and
each append checks the new event against it (``_rules.check_event``) before
folding the event in (:meth:`ReplayState.apply`). Because append and replay go
through the same two functions, a journal that was accepted one event at a time
always replays to the same states and head.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contracts._delivery import AuthorityPolicy
from contracts._errors import ErrorCode, error
from contracts._ids import Digest, NodeId
from contracts._journal import (
    JournalHeader,
    NodeDecl,
    NodeState,
    RecordRef,
    TaskKind,
    Transition,
)
from host.journal._codec import at, dumps_canonical, sha256_digest

Key = tuple[NodeId, int]
"""A state key: ``(node, activation)``."""

SourceResolver = Callable[[RecordRef], bool]
"""Answers whether a record reference resolves to an existing record with that digest."""

#: States an activation can still be worked in; two of them never coexist for one node.
LIVE_STATES = frozenset({NodeState.PENDING, NodeState.READY, NodeState.ACTIVE, NodeState.BLOCKED})
#: States that mean "no longer current": dependents of these must be invalidated too.
RETIRED_STATES = frozenset({NodeState.INVALIDATED, NodeState.SUPERSEDED})

#: JSON value -> member, for reading an event's JSON fields.
STATE_OF: dict[str, NodeState] = {member.value: member for member in NodeState}
TRANSITION_OF: dict[str, Transition] = {member.value: member for member in Transition}

# Members bound once (an enum attribute look-up is a descriptor call each time).
_PENDING = NodeState.PENDING
_DEPENDENCIES_SATISFIED = Transition.DEPENDENCIES_SATISFIED
_WORK_STARTED = Transition.WORK_STARTED
#: Transitions that close the open attempt.
_ENDS_ATTEMPT = frozenset(
    {Transition.WORK_COMPLETED, Transition.WORK_FAILED, Transition.WORK_INVALIDATED}
)


def authority_digest(policy: AuthorityPolicy) -> Digest:
    """Return the digest a journal header binds for ``policy``.

    Same value as ``AdmittedDelivery.authority_digest`` for the delivery's policy.
    """
    return sha256_digest(dumps_canonical(policy.model_dump(mode="json", exclude_none=True)))


@dataclass(frozen=True, slots=True)
class NodeRule:
    """What the append rules consult about one node, precomputed once per header.

    Lets the per-event checks be set look-ups instead of scans of the node's
    declaration; the declaration itself is kept for the error messages.
    """

    decl: NodeDecl
    """The node's declaration."""
    outputs: frozenset[tuple[str, str]]
    """``(kind, id)`` of every artifact a completion must reference."""
    needs_conduct: bool
    """Whether a completion must reference a conduct record (human or hybrid task)."""
    upstream: frozenset[str]
    """Nodes a dependency may name: ``upstream`` and ``failure_upstream``."""
    failure_upstream: frozenset[str]
    """Nodes whose current failure satisfies a dependency."""
    human_steps: frozenset[Transition]
    """Transitions that are a human step on this node (they need a human in a role)."""
    roles: frozenset[str]
    """Roles admitted to perform a human step."""


#: Work steps a human must perform on a human task.
HUMAN_STEPS = frozenset(
    {
        Transition.WORK_STARTED,
        Transition.WORK_BLOCKED,
        Transition.BLOCK_CLEARED,
        Transition.WORK_COMPLETED,
        Transition.WORK_FAILED,
    }
)


def node_rule(decl: NodeDecl) -> NodeRule:
    """Precompute ``decl``'s rule tables."""
    if decl.task is TaskKind.HUMAN:
        human_steps = HUMAN_STEPS
    elif decl.task is TaskKind.HYBRID:
        human_steps = frozenset({Transition.WORK_COMPLETED})
    else:
        human_steps = frozenset()
    return NodeRule(
        decl=decl,
        outputs=frozenset((artifact.kind, artifact.id) for artifact in decl.artifacts),
        needs_conduct=decl.task is not TaskKind.AUTOMATED,
        upstream=frozenset(decl.upstream) | frozenset(decl.failure_upstream),
        failure_upstream=frozenset(decl.failure_upstream),
        human_steps=human_steps,
        roles=frozenset(decl.roles),
    )


@dataclass(slots=True)
class AttemptState:
    """One attempt of one activation."""

    id: str
    sequence: int
    started: int
    """Ordinal of the work-started event."""
    outcome: NodeState | None = None
    """completed, failed or invalidated once over; None while open."""
    ended: int | None = None
    """Ordinal of the event that closed the attempt."""


@dataclass(slots=True)
class ActivationState:
    """One activation of one node."""

    state: NodeState
    first: int
    """Ordinal of the activation's first event (0 for the implicit start activation)."""
    predecessors: tuple[Key, ...] = ()
    attempts: list[AttemptState] = field(default_factory=list)
    dependents: list[Key] = field(default_factory=list)
    """Activations whose readiness named this one as a predecessor."""
    events: list[int] = field(default_factory=list)
    """Ordinals of the events that moved this activation."""

    def open_attempt(self) -> AttemptState | None:
        """The attempt still in progress, if any."""
        if self.attempts and self.attempts[-1].outcome is None:
            return self.attempts[-1]
        return None


@dataclass(slots=True)
class OpenBatch:
    """A multi-event command whose events are still arriving."""

    request: str
    transition: Transition
    size: int
    keys: list[Key]


class ReplayState:
    """Everything the append rules consult, derived from header + events."""

    def __init__(
        self,
        header: JournalHeader,
        header_digest: Digest,
        policy: AuthorityPolicy,
        resolver: SourceResolver | None = None,
    ) -> None:
        self.header = header
        self.policy = policy
        self.resolver = resolver
        self.nodes: dict[NodeId, NodeDecl] = _node_table(header)
        self.rules: dict[str, NodeRule] = {nid: node_rule(decl) for nid, decl in self.nodes.items()}
        """Per-node rule tables (shared, immutable: clones reuse them)."""
        self.activations: dict[Key, ActivationState] = {
            (header.start, 1): ActivationState(state=NodeState.READY, first=0)
        }
        self.latest: dict[NodeId, int] = {header.start: 1}
        self.retired: dict[NodeId, int] = {}
        """Node -> how many of its activations are invalidated or superseded."""
        # request id -> (request digest, first ordinal, last ordinal): a request's
        # events are contiguous (one event, or one batch). Plain tuples of atoms,
        # which the garbage collector stops tracking.
        self.requests: dict[str, tuple[Digest, int, int]] = {}
        self.batch: OpenBatch | None = None
        self.head = header_digest
        self.count = 0

    def clone(self) -> ReplayState:
        """A deep copy, so a multi-event command can be tried and dropped on refusal."""
        twin = copy.copy(self)
        twin.activations = copy.deepcopy(self.activations)
        twin.latest = dict(self.latest)
        twin.retired = dict(self.retired)
        twin.requests = dict(self.requests)
        twin.batch = copy.deepcopy(self.batch)
        return twin

    def state_of(self, key: Key) -> NodeState:
        """Current state of ``key``; an activation with no events is pending.

        Exception: once every activation of the start node is invalidated or
        superseded (a restart from a savepoint), its next activation begins
        ``ready``, as the first one did.
        """
        found = self.activations.get(key)
        if found is not None:
            return found.state
        node, number = key
        latest = self.latest.get(node, 0)
        # Activations are numbered contiguously, so "all retired" is a count.
        if (
            node == self.header.start
            and number == latest + 1
            and (self.retired.get(node, 0) == latest)
        ):
            return NodeState.READY
        return NodeState.PENDING

    def is_current_completion(self, key: Key) -> bool:
        """Completed and still the node's latest activation (nothing newer, not retired)."""
        found = self.activations.get(key)
        return (
            found is not None
            and found.state is NodeState.COMPLETED
            and self.latest.get(key[0]) == key[1]
        )

    def is_current_failure(self, key: Key) -> bool:
        """Failed and still the node's latest activation (for failure successors)."""
        found = self.activations.get(key)
        return (
            found is not None
            and found.state is NodeState.FAILED
            and self.latest.get(key[0]) == key[1]
        )

    def closure(self, roots: list[Key]) -> list[Key]:
        """Roots plus every activation that transitively depends on them.

        Activations already invalidated or superseded are left out (their
        dependents were retired with them). The order is the order in which the
        activations first appeared, so every activation follows its predecessors.
        """
        found: set[Key] = set()
        stack = list(roots)
        while stack:
            key = stack.pop()
            if key in found:
                continue
            found.add(key)
            record = self.activations.get(key)
            for child in record.dependents if record is not None else ():
                if self.activations[child].state not in RETIRED_STATES:
                    stack.append(child)
        return sorted(found, key=lambda key: (self._first(key), key))

    def _first(self, key: Key) -> int:
        # A pending activation with no events yet has no dependents; it goes last.
        record = self.activations.get(key)
        return record.first if record is not None else self.count + 1

    def apply(self, event: dict[str, Any], digest: Digest) -> None:
        """Fold an already checked event (its JSON fields) into the state."""
        node = event["node"]
        key = (node, event["activation"])
        ordinal = event["ordinal"]
        record = self.activations.get(key)
        if record is None:
            record = ActivationState(state=_PENDING, first=ordinal)
            self.activations[key] = record
            self.latest[node] = key[1]
        result = STATE_OF[event["result_state"]]
        if result in RETIRED_STATES and record.state not in RETIRED_STATES:
            self.retired[node] = self.retired.get(node, 0) + 1
        record.state = result
        record.events.append(ordinal)
        transition = TRANSITION_OF[event["transition"]]
        if transition is _DEPENDENCIES_SATISFIED:
            record.predecessors = tuple(
                [(ref["node"], ref["activation"]) for ref in event["predecessors"]]
            )
            for pred in record.predecessors:
                self.activations[pred].dependents.append(key)
        elif transition is _WORK_STARTED:
            attempt = event["attempt"]
            if attempt is not None:
                record.attempts.append(AttemptState(attempt["id"], attempt["sequence"], ordinal))
        elif transition in _ENDS_ATTEMPT:
            open_attempt = record.open_attempt()
            if open_attempt is not None:
                open_attempt.outcome = result
                open_attempt.ended = ordinal
        request = event["request"]
        known = self.requests.get(request)
        if known is None:
            self.requests[request] = (event["request_digest"], ordinal, ordinal)
        else:  # the next event of the same batch
            self.requests[request] = (known[0], known[1], ordinal)
        batch = event["batch"]
        if batch is not None:
            self._track_batch(request, transition, batch, key, ordinal)
        self.head = digest
        self.count = ordinal

    def _track_batch(
        self, request: str, transition: Transition, batch: dict[str, int], key: Key, ordinal: int
    ) -> None:
        if self.batch is None:
            self.batch = OpenBatch(request, transition, batch["size"], [])
        self.batch.keys.append(key)
        if batch["index"] == batch["size"]:
            done, self.batch = self.batch, None
            if done.transition is Transition.WORK_INVALIDATED:
                self._check_closed(done, ordinal)

    def _check_closed(self, batch: OpenBatch, ordinal: int) -> None:
        # An invalidation must leave no current activation that depends on a
        # retired one; otherwise dependent work would still look valid.
        for key in batch.keys:
            for child in self.activations[key].dependents:
                if self.activations[child].state not in RETIRED_STATES:
                    raise error(
                        ErrorCode.JOURNAL_PARTIAL_INVALIDATION,
                        f"{child[0]}#{child[1]} depends on {key[0]}#{key[1]} "
                        "but was left out of the invalidation",
                        path=at(ordinal),
                    )

    def finish(self) -> None:
        """Refuse a journal that ends inside a batch."""
        if self.batch is not None:
            code = (
                ErrorCode.JOURNAL_PARTIAL_INVALIDATION
                if self.batch.transition is Transition.WORK_INVALIDATED
                else ErrorCode.JOURNAL_BAD_SUCCESSOR
            )
            raise error(
                code,
                f"journal ends inside batch {self.batch.request!r}",
                path=at(self.count),
                expected=f"{self.batch.size} events",
            )


def _node_table(header: JournalHeader) -> dict[NodeId, NodeDecl]:
    nodes: dict[NodeId, NodeDecl] = {}
    for decl in header.nodes:
        if decl.id in nodes:
            raise error(
                ErrorCode.JOURNAL_MALFORMED_RECORD,
                f"node {decl.id!r} is declared twice",
                path=at(0),
            )
        nodes[decl.id] = decl
    for decl in header.nodes:
        for upstream in decl.upstream:
            if upstream not in nodes:
                raise error(
                    ErrorCode.JOURNAL_UNKNOWN_NODE,
                    f"node {decl.id!r} names unknown upstream {upstream!r}",
                    path=at(0),
                )
    if header.start not in nodes:
        raise error(
            ErrorCode.JOURNAL_UNKNOWN_NODE,
            f"start node {header.start!r} is not declared",
            path=at(0),
        )
    return nodes
