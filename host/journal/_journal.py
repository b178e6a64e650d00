"""The journal: validated appends onto a hash chain, plus rehydration.

A :class:`Journal` holds the header, the events and the replay state derived
from them. It never touches storage: the caller persists each returned event
(in the same transaction as its checkpoint) and rebuilds the journal after a
restart with :meth:`Journal.rehydrate`, which replays every rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from contracts._delivery import AuthorityPolicy
from contracts._errors import ErrorCode, error
from contracts._ids import Digest, NodeId
from contracts._journal import (
    MAX_JOURNAL_INT,
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
from host.journal._codec import (
    ENUM_VALUES,
    at,
    dumps_canonical,
    encode_record_with_digest,
    encode_split,
    record_digest,
    sha256_digest,
)
from host.journal._commands import AppendCommand, BindSuccessorCommand, InvalidateCommand
from host.journal._projection import Projection, project
from host.journal._rules import check_event
from host.journal._state import Key, ReplayState, SourceResolver, authority_digest

#: The spelling a journal time must have (the ``time`` field's pattern).
_TIME_SPELLING = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
_INVALIDATED = Transition.WORK_INVALIDATED
_SUCCESSOR_BOUND = Transition.SUCCESSOR_BOUND
#: Every field of an event: a trusted event sets them all.
_EVENT_FIELDS = frozenset(JournalEvent.model_fields)


def _trusted_event(values: dict[str, Any]) -> JournalEvent:
    """A :class:`JournalEvent` over ``values`` without re-validating them.

    Only for values that already satisfy the schema: every field present, in
    declaration order, each either validated where the command was built (the
    same constrained types) or derived by the journal (digests, ordinal, time,
    states). This is what ``model_construct`` does, minus its per-field default
    and alias handling, which a complete, alias-free field set never needs.
    """
    event = JournalEvent.__new__(JournalEvent)
    object.__setattr__(event, "__dict__", values)
    object.__setattr__(event, "__pydantic_fields_set__", set(_EVENT_FIELDS))
    object.__setattr__(event, "__pydantic_extra__", None)
    object.__setattr__(event, "__pydantic_private__", None)
    return event


class Journal:
    """One execution's transition journal (in memory; the caller persists)."""

    __slots__ = ("_events", "_lines", "_state", "_time")

    #: How many of the latest appended events keep their encoded line for the writer.
    KEEP_LINES = 256

    def __init__(self, state: ReplayState, events: list[JournalEvent]) -> None:
        # Private: use create() or rehydrate(), which establish the invariants.
        self._state = state
        self._events = events
        # ordinal -> (digest, stored line) of recently appended events, computed once
        # by the append and handed to the writer (bounded: see _keep).
        self._lines: dict[int, tuple[Digest, bytes]] = {}
        # The last (instant, spelling) formatted: one step's commands share one time.
        self._time: tuple[datetime, str] | None = None

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

    def events_since(self, count: int) -> list[JournalEvent]:
        """The events after the first ``count`` ones (no copy of the whole journal)."""
        return self._events[count:]

    def encoded(self, event: JournalEvent) -> tuple[Digest, bytes]:
        """Return ``(record_digest(event), encode_record(event))`` for an event.

        Events this journal appended recently return the values the append
        already computed; any other event is encoded again (the same bytes).
        """
        kept = self._lines.get(event.ordinal)
        if kept is not None and self._events[event.ordinal - 1] is event:
            return kept
        return encode_record_with_digest(event)

    def projection(self) -> Projection:
        """Current states and attempt history, derived from the replayed events."""
        return project(self._state)

    def append(self, command: AppendCommand) -> JournalEvent:
        """Record one transition and return its event.

        Repeating a request (same id, same content) returns the event already
        recorded and appends nothing.

        Hot path (one call per Host event): the request content is dumped once
        and serves both the request digest and the event's stored fields; the
        event's digest and line are computed once and kept for the writer
        (:meth:`encoded`). ``command`` is validated when it is built; every
        other field of the event is derived here, so the event itself is not
        validated a second time (see :func:`_trusted_event`).
        """
        content = command.request_content()
        request_digest = sha256_digest(dumps_canonical(content))
        known = self._known_request(command.request, request_digest)
        if known:
            return known[0]
        self._check_head(command.expected_head)
        transition = command.transition
        if transition is _INVALIDATED or transition is _SUCCESSOR_BOUND:
            raise error(
                ErrorCode.JOURNAL_INVALID_TRANSITION,
                f"{transition.value} is recorded by invalidate() or bind_successor()",
                path=at(self._state.count + 1),
            )
        state = self._state
        prior_state = command.expected_state
        result_state = next_state(prior_state, transition) or prior_state
        ordinal = state.count + 1
        time = self._format_time(command.at)
        values: dict[str, Any] = {
            "record": "event",
            "execution": state.header.execution,
            "ordinal": ordinal,
            "prior": state.head,
            "request": command.request,
            "request_digest": request_digest,
            "node": command.node,
            "activation": command.activation,
            "prior_state": prior_state,
            "result_state": result_state,
            "transition": transition,
            "actor": command.actor,
            "time": time,
            "rationale": command.rationale,
            "attempt": command.attempt,
            "refs": command.refs,
            "authorization": command.authorization,
            "approvals": command.approvals,
            "error": command.error,
            "predecessors": command.predecessors,
            "batch": None,
            "invalidation": None,
            "successor": None,
        }
        if ordinal <= MAX_JOURNAL_INT and _TIME_SPELLING.fullmatch(time):
            event = _trusted_event(values)
        else:  # outside the schema: let validation refuse it exactly as it always did
            event = JournalEvent(**values)
        check_event(state, event)
        # The stored fields: the command's content already holds every nested value
        # in its JSON form (together equal to ``event_fields(event)``; tests pin
        # this), split around where ``digest`` sorts (see encode_split).
        low = {
            "activation": content["activation"],
            "actor": content["actor"],
            "approvals": content["approvals"],
            "attempt": content["attempt"],
            "authorization": content["authorization"],
            "batch": None,
        }
        high = {
            "error": content["error"],
            "execution": values["execution"],
            "invalidation": None,
            "node": content["node"],
            "ordinal": ordinal,
            "predecessors": content["predecessors"],
            "prior": values["prior"],
            "prior_state": content["expected_state"],
            "rationale": content["rationale"],
            "record": "event",
            "refs": content["refs"],
            "request": command.request,
            "request_digest": request_digest,
            "result_state": ENUM_VALUES[result_state],
            "successor": None,
            "time": time,
            "transition": content["transition"],
        }
        encoded = encode_split(low, high)
        state.apply(event, encoded[0])
        self._events.append(event)
        self._keep(ordinal, encoded)
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
        made: list[tuple[JournalEvent, tuple[Digest, bytes]]] = []
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
                time=self._format_time(command.at),
                rationale=command.rationale,
                batch=Batch(index=index, size=len(keys)),
                **extra,
            )
            check_event(trial, event)
            encoded = encode_record_with_digest(event)
            trial.apply(event, encoded[0])
            made.append((event, encoded))
        trial.resolver = self._state.resolver
        self._state = trial
        for event, encoded in made:
            self._events.append(event)
            self._keep(event.ordinal, encoded)
        return tuple(event for event, _ in made)

    def _keep(self, ordinal: int, encoded: tuple[Digest, bytes]) -> None:
        self._lines[ordinal] = encoded
        self._lines.pop(ordinal - self.KEEP_LINES, None)

    def _format_time(self, moment: datetime) -> str:
        last = self._time
        if last is not None and last[0] is moment:
            return last[1]
        spelled = format_time(moment)
        self._time = (moment, spelled)
        return spelled

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
