"""The append fast path writes exactly what the generic, validated path would.

``Journal.append`` builds each event's stored fields by hand, splits them
around ``digest`` (``encode_split``), skips re-validating the event it derives
and keeps the line for the writer. None of that may change a byte: every
check here compares the fast result against ``model_dump(mode="json")``, the
plain ``encode_record`` and the strict decoder.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from contracts._journal import (
    ActivationRef,
    Actor,
    ActorKind,
    Approval,
    ArtifactDecl,
    ErrorInfo,
    JournalEvent,
    NodeDecl,
    NodeState,
    Transition,
    format_time,
)
from host.journal import AppendCommand, Journal, decode_line, encode_record, record_digest
from host.journal._codec import (
    DIGEST_KEY,
    dumps_canonical,
    encode_record_with_digest,
    encode_split,
    event_fields,
    record_fields,
    sha256_digest,
)

from .scenario import EPOCH, POLICY, RUNNER, Driver, happy_journal, header, ref
from .strategies import actors, digests, events, node_ids, record_refs, texts, tokens


def _split(fields: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    low = {k: v for k, v in fields.items() if k < DIGEST_KEY}
    high = {k: v for k, v in fields.items() if k > DIGEST_KEY}
    return low, high


def _generic_request_digest(command: AppendCommand) -> str:
    content = command.model_dump(mode="json", exclude={"request", "expected_head", "at"})
    content["command"] = "AppendCommand"
    return sha256_digest(dumps_canonical(content))


@given(events)
def test_event_fields_equal_model_dump(event: JournalEvent) -> None:
    fast = event_fields(event)
    assert fast == event.model_dump(mode="json")
    assert list(fast) == list(JournalEvent.model_fields)
    assert record_fields(event) == fast


@given(events)
def test_split_encoding_is_the_stored_line(event: JournalEvent) -> None:
    digest, line = encode_split(*_split(event_fields(event)))
    assert line == encode_record(event)
    assert digest == record_digest(event)
    assert encode_record_with_digest(event) == (digest, line)
    assert decode_line(line) == event


@pytest.mark.parametrize("low", [{}, {"a": 1}])
@pytest.mark.parametrize("high", [{}, {"e": [1, {"x": None}]}])
def test_split_encoding_with_empty_halves(low: dict[str, Any], high: dict[str, Any]) -> None:
    fields = {**low, **high}
    digest, line = encode_split(low, high)
    assert digest == sha256_digest(dumps_canonical(fields))
    assert line == dumps_canonical({**fields, DIGEST_KEY: digest})


commands = st.builds(
    AppendCommand,
    request=tokens,
    expected_head=digests,
    actor=actors,
    at=st.datetimes(timezones=st.just(UTC)),
    rationale=texts,
    node=node_ids,
    activation=st.integers(min_value=1, max_value=2**53 - 1),
    expected_state=st.sampled_from(NodeState),
    transition=st.sampled_from(Transition),
    attempt=st.none() | st.builds(dict, id=tokens, sequence=st.integers(1, 9)),
    refs=st.lists(record_refs, max_size=3).map(tuple),
    authorization=st.none() | record_refs,
    error=st.none() | st.builds(ErrorInfo, code=tokens, message=texts),
    approvals=st.lists(
        st.builds(
            Approval, actor=tokens, kind=st.sampled_from(ActorKind), role=tokens, record=record_refs
        ),
        max_size=2,
    ).map(tuple),
    predecessors=st.lists(
        st.builds(ActivationRef, node=node_ids, activation=st.integers(1, 99)), max_size=3
    ).map(tuple),
)


@given(commands)
def test_fast_request_digest_equals_model_dump(command: AppendCommand) -> None:
    assert command.request_digest() == _generic_request_digest(command)


@given(
    st.datetimes(
        min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=st.just(UTC)
    ),
    st.integers(-14 * 60, 14 * 60),
)
def test_format_time_is_the_strftime_spelling(moment: datetime, offset_min: int) -> None:
    shifted = moment.astimezone(timezone(timedelta(minutes=offset_min)))
    expected = moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert format_time(moment) == expected
    assert format_time(shifted) == expected


def _assert_kept_lines_are_exact(journal: Journal) -> None:
    for event in journal.events:
        digest, line = journal.encoded(event)
        assert (digest, line) == encode_record_with_digest(event)
        decoded = decode_line(line, event.ordinal)
        assert decoded == event
        # The trusted construction equals a validated one, field for field.
        assert JournalEvent.model_validate(event.model_dump()) == event
        assert event.model_fields_set == set(JournalEvent.model_fields)


def test_scenario_lines_are_exact() -> None:
    _assert_kept_lines_are_exact(happy_journal())


one_node = header().model_copy(
    update={
        "nodes": (
            NodeDecl(
                id=header().start,
                artifacts=(ArtifactDecl(kind="port", id="out"),),
            ),
        )
    }
)


@given(
    actor_id=tokens,
    rationale=texts,
    extra_refs=st.lists(record_refs, max_size=3),
    message=st.none() | texts,
    code=tokens,
)
def test_appended_lines_are_exact(
    actor_id: str, rationale: str, extra_refs: list[Any], message: str | None, code: str
) -> None:
    journal = Journal.create(one_node, POLICY)
    d = Driver(journal)
    actor = Actor(id=actor_id, kind=ActorKind.AUTOMATION)
    start = one_node.start
    attempt = {"id": "a-1", "sequence": 1}
    d.do(start, Transition.WORK_STARTED, NodeState.READY, attempt=attempt, actor=actor)
    if message is not None:
        d.do(
            start,
            Transition.WORK_BLOCKED,
            NodeState.ACTIVE,
            attempt=attempt,
            error=ErrorInfo(code=code, message=message),
            rationale=rationale,
        )
        d.do(start, Transition.BLOCK_CLEARED, NodeState.BLOCKED, attempt=attempt)
    d.do(
        start,
        Transition.WORK_COMPLETED,
        NodeState.ACTIVE,
        attempt=attempt,
        refs=(ref("port", "out"), *extra_refs),
        rationale=rationale,
    )
    _assert_kept_lines_are_exact(journal)
    # A replay of the stored lines reaches the same head.
    lines = [encode_record(journal.header)] + [journal.encoded(e)[1] for e in journal.events]
    again = Journal.rehydrate(
        one_node, [decode_line(line, i) for i, line in enumerate(lines) if i], POLICY
    )
    assert again.head == journal.head


def test_stored_lines_are_what_the_writer_gets() -> None:
    journal = happy_journal()
    rows = journal.lines_since(0)
    assert [row[0] for row in rows] == list(range(1, len(journal) + 1))
    for (ordinal, digest, line), event in zip(rows, journal.events, strict=True):
        assert ordinal == event.ordinal
        assert (digest, line) == encode_record_with_digest(event) == journal.encoded(event)
    assert journal.lines_since(len(journal) - 2) == rows[-2:]
    # The fields read back from a line are the event's own.
    assert journal.fields_since(0) == [event_fields(event) for event in journal.events]
    # An equal event that is not this journal's own is encoded again, to the same bytes.
    copy = journal.events[0].model_copy()
    assert journal.encoded(copy) == rows[0][1:]


def test_a_time_outside_the_schema_is_still_refused_by_validation() -> None:
    journal = Journal.create(header(), POLICY)
    command = AppendCommand(
        request="r-1",
        expected_head=journal.head,
        node=header().start,
        expected_state=NodeState.READY,
        transition=Transition.WORK_STARTED,
        attempt={"id": "a-1", "sequence": 1},
        actor=RUNNER,
        at=datetime(999, 1, 1, tzinfo=UTC),
    )
    with pytest.raises(ValidationError):
        journal.append(command)
    assert len(journal) == 0
    ok = command.model_copy(update={"at": EPOCH})
    assert journal.append(ok).time == format_time(EPOCH)
