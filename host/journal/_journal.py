"""The journal: validated appends onto a hash chain, plus rehydration.

A :class:`Journal` holds the header, every event's JSON fields and the replay
state derived from them (typed events are built on demand). It never touches
storage: the caller persists each appended event's line (``lines_since``, in
the same transaction as its checkpoint) and rebuilds the journal after a
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
    TRANSITIONS,
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
    at,
    dumps_canonical,
    encode_fields,
    encode_record_with_digest,
    encode_split,
    event_fields,
    record_digest,
    sha256_digest,
)
from host.journal._commands import AppendCommand, BindSuccessorCommand, InvalidateCommand
from host.journal._fields import fields_of, trusted_event, verify_policy
from host.journal._projection import Projection, project
from host.journal._rules import check_event
from host.journal._state import (
    STATE_OF,
    TRANSITION_OF,
    Key,
    ReplayState,
    SourceResolver,
)

#: The spelling a journal time must have (the ``time`` field's pattern).
_TIME_SPELLING = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
_INVALIDATED = Transition.WORK_INVALIDATED
_SUCCESSOR_BOUND = Transition.SUCCESSOR_BOUND
#: The state table in JSON values: ``(prior, transition) -> result``.
_RESULT_VALUES = {
    (prior.value, transition.value): result.value
    for (prior, transition), result in TRANSITIONS.items()
}


class Journal:
    """One execution's transition journal (in memory; the caller persists)."""

    __slots__ = ("_digests", "_lines", "_state", "_time", "_typed")

    def __init__(self, state: ReplayState) -> None:
        # Private: use create() or rehydrate(), which establish the invariants.
        self._state = state
        # Every event's digest and stored line, by ordinal - 1: the record itself,
        # kept as bytes (nothing for the garbage collector to traverse, and a
        # third of the memory of the parsed fields). Everything else is derived.
        self._digests: list[Digest] = []
        self._lines: list[bytes] = []
        # The typed events, built on first use (None until then).
        self._typed: list[JournalEvent | None] = []
        # The last (instant, spelling, fits the pattern): one step's commands share one time.
        self._time: tuple[datetime, str, bool] | None = None

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
        verify_policy(header, policy)
        return cls(ReplayState(header, record_digest(header), policy, resolver))

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
        journal.extend(events)
        return journal

    def extend(self, events: Iterable[JournalEvent]) -> None:
        """Replay events stored after this journal's last one, with every rule rehydrate runs.

        A journal that raises here is left part-extended: discard it and rehydrate
        from the store, which also names duplicates by their first ordinal.
        """
        state = self._state
        chain = ChainCheck(state.header.execution, state.head)
        chain.resume(state.head, len(self._lines))
        for event in events:
            fields = event_fields(event)
            digest, line = encode_fields(fields)
            chain.event(event.execution, event.ordinal, event.prior, digest)
            check_event(state, fields)
            state.apply(fields, digest)
            self._keep(digest, line, None)
        state.finish()

    @property
    def header(self) -> JournalHeader:
        """The header record."""
        return self._state.header

    @property
    def events(self) -> tuple[JournalEvent, ...]:
        """Every event, by ordinal."""
        return tuple(self._event(index) for index in range(len(self._lines)))

    @property
    def head(self) -> Digest:
        """Digest of the last record: what the next command must name as ``expected_head``."""
        return self._state.head

    def __len__(self) -> int:
        return len(self._lines)

    def events_since(self, count: int) -> list[JournalEvent]:
        """The events after the first ``count`` ones."""
        return [self._event(index) for index in range(count, len(self._lines))]

    def fields_since(self, count: int) -> list[dict[str, Any]]:
        """JSON fields of the events after the first ``count`` ones.

        The same values as ``event_fields(event)`` for those events, read back
        from their lines without building the typed records.
        """
        return [fields_of(line) for line in self._lines[count:]]

    def lines_since(self, count: int) -> list[tuple[int, Digest, bytes]]:
        """``(ordinal, digest, stored line)`` of the events after the first ``count`` ones."""
        return [
            (ordinal, self._digests[ordinal - 1], self._lines[ordinal - 1])
            for ordinal in range(count + 1, len(self._lines) + 1)
        ]

    def encoded(self, event: JournalEvent) -> tuple[Digest, bytes]:
        """Return ``(record_digest(event), encode_record(event))`` for an event."""
        index = event.ordinal - 1
        if 0 <= index < len(self._lines) and self._typed[index] is event:
            return self._digests[index], self._lines[index]
        return encode_record_with_digest(event)

    def projection(self) -> Projection:
        """Current states and attempt history, derived from the replayed events."""
        return project(self._state)

    def append(self, command: AppendCommand) -> JournalEvent:
        """Record one transition and return its event.

        Repeating a request (same id, same content) returns the event already
        recorded and appends nothing.
        """
        ordinal, fields = self._append(
            command.request, command.expected_head, command.at, command.request_content()
        )
        if fields is not None:
            # New: the typed event is the command's validated values plus what the
            # journal derived, so it needs no validation pass of its own.
            self._typed[ordinal - 1] = trusted_event(
                {
                    "record": "event",
                    "execution": fields["execution"],
                    "ordinal": ordinal,
                    "prior": fields["prior"],
                    "request": command.request,
                    "request_digest": fields["request_digest"],
                    "node": command.node,
                    "activation": command.activation,
                    "prior_state": command.expected_state,
                    "result_state": STATE_OF[fields["result_state"]],
                    "transition": command.transition,
                    "actor": command.actor,
                    "time": fields["time"],
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
            )
        return self._event(ordinal - 1)

    def append_content(
        self, request: str, expected_head: Digest, at_: datetime, content: dict[str, Any]
    ) -> int:
        """Record one transition given as request content in JSON form; return its ordinal.

        ``content`` is exactly what ``AppendCommand.request_content()`` returns
        for the command (every member present, values in their JSON form, nested
        values already valid against the command's schema). This is the hot path
        (one call per Host event): the content is dumped once for the request
        digest, its values become the event's fields, the rules read those
        fields, and the event's digest and line are computed once and kept for
        the writer (:meth:`lines_since`). The typed event is built only when
        someone asks for it.

        Repeating a request (same id, same content) returns the recorded ordinal.
        """
        return self._append(request, expected_head, at_, content)[0]

    def _append(
        self, request: str, expected_head: Digest, at_: datetime, content: dict[str, Any]
    ) -> tuple[int, dict[str, Any] | None]:
        """The append core: the ordinal, and the new event's fields (None for a repeat)."""
        request_digest = sha256_digest(dumps_canonical(content))
        state = self._state
        known = self._repeat(request, request_digest)
        if known is not None:
            return known[0], None
        self._check_head(expected_head)
        transition = TRANSITION_OF.get(content["transition"])
        if transition is None or content["expected_state"] not in STATE_OF:
            raise error(
                ErrorCode.JOURNAL_MALFORMED_RECORD,
                f"unknown transition {content['transition']!r} "
                f"or state {content['expected_state']!r}",
                path=at(state.count + 1),
            )
        if transition is _INVALIDATED or transition is _SUCCESSOR_BOUND:
            raise error(
                ErrorCode.JOURNAL_INVALID_TRANSITION,
                f"{content['transition']} is recorded by invalidate() or bind_successor()",
                path=at(state.count + 1),
            )
        # An inadmissible pair keeps the prior state here; check_event refuses it.
        result_state = _RESULT_VALUES.get(
            (content["expected_state"], content["transition"]), content["expected_state"]
        )
        ordinal = state.count + 1
        time, time_fits = self._spell_time(at_)
        # Split around where ``digest`` sorts (see encode_split); the two halves
        # together are the event's fields, equal to ``event_fields(event)``.
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
            "execution": state.header.execution,
            "invalidation": None,
            "node": content["node"],
            "ordinal": ordinal,
            "predecessors": content["predecessors"],
            "prior": state.head,
            "prior_state": content["expected_state"],
            "rationale": content["rationale"],
            "record": "event",
            "refs": content["refs"],
            "request": request,
            "request_digest": request_digest,
            "result_state": result_state,
            "successor": None,
            "time": time,
            "transition": content["transition"],
        }
        fields = low | high
        if ordinal > MAX_JOURNAL_INT or not time_fits:
            # Outside the schema: validation refuses it exactly as it always did.
            JournalEvent.model_validate(fields)
        check_event(state, fields)
        digest, line = encode_split(low, high)
        state.apply(fields, digest)
        self._keep(digest, line, None)
        return ordinal, fields

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
        time = self._spell_time(command.at)[0]
        made: list[tuple[JournalEvent, dict[str, Any], tuple[Digest, bytes]]] = []
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
                time=time,
                rationale=command.rationale,
                batch=Batch(index=index, size=len(keys)),
                **extra,
            )
            fields = event_fields(event)
            check_event(trial, fields)
            encoded = encode_fields(fields)
            trial.apply(fields, encoded[0])
            made.append((event, fields, encoded))
        trial.resolver = self._state.resolver
        self._state = trial
        for event, _, (line_digest, line) in made:
            self._keep(line_digest, line, event)
        return tuple(event for event, _, _ in made)

    def _keep(self, digest: Digest, line: bytes, event: JournalEvent | None) -> None:
        self._digests.append(digest)
        self._lines.append(line)
        self._typed.append(event)

    def _event(self, index: int) -> JournalEvent:
        """The typed event at ``index`` (ordinal - 1), built from its line on first use."""
        event = self._typed[index]
        if event is None:
            event = JournalEvent.model_validate(fields_of(self._lines[index]))
            self._typed[index] = event
        return event

    def _spell_time(self, moment: datetime) -> tuple[str, bool]:
        """``moment``'s spelling and whether it fits the schema's pattern (checked once)."""
        last = self._time
        if last is not None and last[0] is moment:
            return last[1], last[2]
        spelled = format_time(moment)
        fits = _TIME_SPELLING.fullmatch(spelled) is not None
        self._time = (moment, spelled, fits)
        return spelled, fits

    def _repeat(self, request: str, digest: Digest) -> tuple[int, int] | None:
        """First and last ordinal of a request already recorded with this content.

        None for a new request; JOURNAL_REQUEST_CONFLICT for a known id whose
        content differs.
        """
        known = self._state.requests.get(request)
        if known is None:
            return None
        if known[0] != digest:
            raise error(
                ErrorCode.JOURNAL_REQUEST_CONFLICT,
                f"request {request!r} was recorded with other content",
                path=at(known[1]),
            )
        return known[1], known[2]

    def _known_request(self, request: str, digest: Digest) -> tuple[JournalEvent, ...]:
        known = self._repeat(request, digest)
        if known is None:
            return ()
        return tuple(self._event(ordinal - 1) for ordinal in range(known[0], known[1] + 1))

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
