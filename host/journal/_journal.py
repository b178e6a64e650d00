"""The journal: validated appends onto a hash chain, plus rehydration.

A :class:`Journal` holds the header, the events and the replay state derived
from them. It never touches storage: the caller persists each returned event
(in the same transaction as its checkpoint) and rebuilds the journal after a
restart with :meth:`Journal.rehydrate`, which replays every rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from contracts._delivery import AuthorityPolicy
from contracts._errors import ErrorCode, error
from contracts._ids import Digest, NodeId
from contracts._journal import (
    Batch,
    InvalidationInfo,
    JournalEvent,
    JournalHeader,
    NodeState,
    Transition,
    format_time,
    next_state,
)
from host.journal._chain import ChainCheck
from host.journal._codec import at, record_digest
from host.journal._commands import AppendCommand, BindSuccessorCommand, InvalidateCommand
from host.journal._projection import Projection, project
from host.journal._rules import check_event
from host.journal._state import Key, ReplayState, SourceResolver, authority_digest


class Journal:
    """One execution's transition journal (in memory; the caller persists)."""

    __slots__ = ("_events", "_state")

    def __init__(self, state: ReplayState, events: list[JournalEvent]) -> None:
        # Private: use create() or rehydrate(), which establish the invariants.
        self._state = state
        self._events = events

    @classmethod
    def create(
        cls,
        header: JournalHeader,
        policy: AuthorityPolicy,
        *,
        resolver: SourceResolver | None = None,
    ) -> Journal:
        """Start an empty journal for ``header`` under the digest-bound ``policy``.

        ``resolver`` (optional) re-checks invalidation sources on replay-time checks.
        Refuses JOURNAL_UNVERIFIED_AUTHORITY when ``policy`` is not the one the
        header binds or has no human approver.
        """
        _verify_policy(header, policy)
        return cls(ReplayState(header, record_digest(header), policy, resolver), [])

    @classmethod
    def rehydrate(
        cls,
        header: JournalHeader,
        events: Iterable[JournalEvent],
        policy: AuthorityPolicy,
        *,
        resolver: SourceResolver | None = None,
    ) -> Journal:
        """Rebuild a journal from stored records, re-checking the chain and every rule.

        Errors carry ``path="ordinal K"`` for the first bad event.
        """
        journal = cls.create(header, policy, resolver=resolver)
        state = journal._state
        chain = ChainCheck(header.execution, state.head)
        for event in events:
            digest = record_digest(event)
            chain.event(event.execution, event.ordinal, event.prior, digest)
            check_event(state, event)
            state.apply(event, digest)
            journal._events.append(event)
        state.finish()
        return journal

    @property
    def header(self) -> JournalHeader:
        """The header record."""
        return self._state.header

    @property
    def events(self) -> tuple[JournalEvent, ...]:
        """Every event, by ordinal."""
        return tuple(self._events)

    @property
    def head(self) -> Digest:
        """Digest of the last record: what the next command must name as ``expected_head``."""
        return self._state.head

    def __len__(self) -> int:
        return len(self._events)

    def projection(self) -> Projection:
        """Current states and attempt history, derived from the replayed events."""
        return project(self._state)

    def append(self, command: AppendCommand) -> JournalEvent:
        """Record one transition and return its event.

        Repeating a request (same id, same content) returns the event already
        recorded and appends nothing.
        """
        known = self._known_request(command.request, command.request_digest())
        if known:
            return known[0]
        self._check_head(command.expected_head)
        if command.transition in (Transition.WORK_INVALIDATED, Transition.SUCCESSOR_BOUND):
            raise error(
                ErrorCode.JOURNAL_INVALID_TRANSITION,
                f"{command.transition.value} is recorded by invalidate() or bind_successor()",
                path=at(self._state.count + 1),
            )
        state = self._state
        event = JournalEvent(
            execution=state.header.execution,
            ordinal=state.count + 1,
            prior=state.head,
            request=command.request,
            request_digest=command.request_digest(),
            node=command.node,
            activation=command.activation,
            prior_state=command.expected_state,
            result_state=next_state(command.expected_state, command.transition)
            or command.expected_state,
            transition=command.transition,
            actor=command.actor,
            time=format_time(command.at),
            rationale=command.rationale,
            attempt=command.attempt,
            refs=command.refs,
            authorization=command.authorization,
            approvals=command.approvals,
            error=command.error,
            predecessors=command.predecessors,
        )
        check_event(state, event)
        state.apply(event, record_digest(event))
        self._events.append(event)
        return event

    def invalidate(
        self, command: InvalidateCommand, resolver: SourceResolver
    ) -> tuple[JournalEvent, ...]:
        """Invalidate ``command.targets`` and their whole descendant closure as one batch.

        ``resolver`` must confirm the source record (JOURNAL_INVALIDATION_SOURCE).
        Returns the batch's events in order: each activation follows its predecessors.
        """
        digest = command.request_digest()
        known = self._known_request(command.request, digest)
        if known:
            return known
        self._check_head(command.expected_head)
        roots = [self._existing(ref.node, ref.activation) for ref in command.targets]
        for key in roots:
            if next_state(self._state.state_of(key), Transition.WORK_INVALIDATED) is None:
                raise error(
                    ErrorCode.JOURNAL_INVALID_TRANSITION,
                    f"{key[0]}#{key[1]} is already {self._state.state_of(key).value}",
                    path=at(self._state.count + 1),
                )
        if not resolver(command.source):
            raise error(
                ErrorCode.JOURNAL_INVALIDATION_SOURCE,
                f"source {command.source.kind}/{command.source.id} does not resolve",
                path=at(self._state.count + 1),
            )
        closure = self._state.closure(roots)
        if command.affected is not None:
            offered = {(ref.node, ref.activation) for ref in command.affected}
            if offered != set(closure):
                missing = sorted(set(closure) - offered)
                raise error(
                    ErrorCode.JOURNAL_PARTIAL_INVALIDATION,
                    "the affected set is not the full descendant closure",
                    path=at(self._state.count + 1),
                    expected=", ".join(f"{n}#{a}" for n, a in missing or sorted(set(closure))),
                )
        info = InvalidationInfo(source=command.source, policy=command.policy)
        return self._batch(
            command, digest, closure, Transition.WORK_INVALIDATED, {"invalidation": info}, resolver
        )

    def bind_successor(self, command: BindSuccessorCommand) -> tuple[JournalEvent, ...]:
        """Supersede invalidated activations by a successor execution, as one batch."""
        digest = command.request_digest()
        known = self._known_request(command.request, digest)
        if known:
            return known
        self._check_head(command.expected_head)
        keys: list[Key] = []
        for ref in command.activations:
            key = (ref.node, ref.activation)
            if key in keys or self._state.state_of(key) is not NodeState.INVALIDATED:
                raise error(
                    ErrorCode.JOURNAL_BAD_SUCCESSOR,
                    f"{ref.node}#{ref.activation} is repeated or not invalidated "
                    f"(it is {self._state.state_of(key).value})",
                    path=at(self._state.count + 1),
                    expected="invalidated",
                )
            keys.append(key)
        return self._batch(
            command,
            digest,
            keys,
            Transition.SUCCESSOR_BOUND,
            {"successor": command.successor},
            self._state.resolver,
        )

    def _batch(
        self,
        command: InvalidateCommand | BindSuccessorCommand,
        digest: Digest,
        keys: list[Key],
        transition: Transition,
        extra: dict[str, Any],
        resolver: SourceResolver | None,
    ) -> tuple[JournalEvent, ...]:
        # Built on a copy so a refusal midway leaves the journal untouched.
        trial = self._state.clone()
        trial.resolver = resolver
        made: list[JournalEvent] = []
        for index, key in enumerate(keys, start=1):
            prior = trial.state_of(key)
            event = JournalEvent(
                execution=trial.header.execution,
                ordinal=trial.count + 1,
                prior=trial.head,
                request=command.request,
                request_digest=digest,
                node=key[0],
                activation=key[1],
                prior_state=prior,
                result_state=next_state(prior, transition) or prior,
                transition=transition,
                actor=command.actor,
                time=format_time(command.at),
                rationale=command.rationale,
                batch=Batch(index=index, size=len(keys)),
                **extra,
            )
            check_event(trial, event)
            trial.apply(event, record_digest(event))
            made.append(event)
        trial.resolver = self._state.resolver
        self._state = trial
        self._events.extend(made)
        return tuple(made)

    def _known_request(self, request: str, digest: Digest) -> tuple[JournalEvent, ...]:
        known = self._state.requests.get(request)
        if known is None:
            return ()
        if known[0] != digest:
            raise error(
                ErrorCode.JOURNAL_REQUEST_CONFLICT,
                f"request {request!r} was recorded with other content",
                path=at(known[1][0]),
            )
        return tuple(self._events[ordinal - 1] for ordinal in known[1])

    def _check_head(self, expected: Digest) -> None:
        if expected != self._state.head:
            raise error(
                ErrorCode.JOURNAL_STALE_HEAD,
                "the journal has moved on since the writer read it",
                path=at(self._state.count),
                expected=self._state.head,
            )

    def _existing(self, node: NodeId, activation: int) -> Key:
        if node not in self._state.nodes:
            raise error(
                ErrorCode.JOURNAL_UNKNOWN_NODE,
                f"node {node!r} is not declared",
                path=at(self._state.count + 1),
            )
        key = (node, activation)
        # The node's next activation exists implicitly (pending); later ones do not.
        if key not in self._state.activations and activation != self._state.latest.get(node, 0) + 1:
            raise error(
                ErrorCode.JOURNAL_ACTIVATION_INVALID,
                f"{node}#{activation} does not exist",
                path=at(self._state.count + 1),
            )
        return key


def _verify_policy(header: JournalHeader, policy: AuthorityPolicy) -> None:
    if authority_digest(policy) != header.authority:
        raise error(
            ErrorCode.JOURNAL_UNVERIFIED_AUTHORITY,
            "the authority policy is not the one the journal header binds",
            path=at(0),
            expected=header.authority,
        )
    # A policy that grants no roles authorizes no human step, so there is nothing
    # for a human to have approved; one that grants roles must name its approver.
    if policy.actors and policy.approver is None:
        raise error(
            ErrorCode.JOURNAL_UNVERIFIED_AUTHORITY,
            "the authority policy has no human approver",
            path=at(0),
        )
