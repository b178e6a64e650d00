"""The audit's plain event-schema check may skip pydantic, never overrule it.

``EventCheck.valid`` returns True only for fields pydantic's ``JournalEvent``
validator accepts; the audit runs pydantic whenever it returns False. So the
properties are: every event the Journal can write passes the plain check (or
the fast path would be dead weight), and no field changed to any JSON value
makes the plain check accept what pydantic refuses.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from contracts._journal import MAX_JOURNAL_INT, JournalEvent
from host.journal._codec import event_fields
from host.journal._event_check import EventCheck
from tests.journal.strategies import events

_VALIDATE = JournalEvent.__pydantic_validator__.validate_python

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-3, max_value=3)
    | st.sampled_from([MAX_JOURNAL_INT, MAX_JOURNAL_INT + 1, 2**64])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5)
    | st.sampled_from(
        [
            "",
            "x" * 257,
            "x" * 4097,
            "sha256:" + "0" * 64,
            "sha256:" + "0" * 63 + "A",
            "2025-01-01T00:00:00.000000Z",
            "2025-01-01T00:00:00.000000Z\n",
            "\uff12025-01-01T00:00:00.000000Z",  # a full-width digit
            "completed",
            "work-started",
            "human",
            "1",
        ]
    ),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=6,
)


def _accepted(fields: dict[str, Any]) -> bool:
    try:
        _VALIDATE(fields)
    except ValidationError:
        return False
    return True


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_paths(item, (*prefix, index)))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(events)
def test_every_writable_event_passes_the_plain_check(event: JournalEvent) -> None:
    fields = event_fields(event)
    assert EventCheck().valid(fields)
    assert EventCheck().valid(fields, chained=True)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(event=events, data=st.data())
def test_the_plain_check_never_accepts_what_pydantic_refuses(
    event: JournalEvent, data: st.DataObject
) -> None:
    fields = event_fields(event)
    path = data.draw(st.sampled_from(_paths(fields)))
    changed = _replace(fields, path, data.draw(json_values))
    check = EventCheck()
    check.valid(fields)  # what it remembers from a valid event must not leak
    if check.valid(changed):
        assert _accepted(changed), (path, changed)
    # After the chain check, execution, ordinal and prior are pinned; nothing else is.
    if path[0] not in {"execution", "ordinal", "prior"} and check.valid(changed, chained=True):
        assert _accepted(changed), (path, changed)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("activation",), 0),
        (("ordinal",), MAX_JOURNAL_INT + 1),
        (("node",), "9lives"),
        (("actor", "kind"), "robot"),
        (("actor", "role"), ""),
        (("time",), "2025-01-01T00:00:00.000000Z\n"),
        (("rationale",), "x" * 4097),
        (("prior",), "sha256:" + "0" * 63 + "A"),
    ],
)
def test_known_refusals_are_left_to_pydantic(path: tuple[str, ...], value: Any) -> None:
    fields = event_fields(_an_event())
    changed = _replace(fields, path, value)
    assert not EventCheck().valid(changed)
    assert not _accepted(changed)


def test_unknown_nested_member_is_left_to_pydantic() -> None:
    fields = event_fields(_an_event())
    changed = {**fields, "actor": {**fields["actor"], "extra": 1}}
    assert not EventCheck().valid(changed)
    assert not _accepted(changed)


def _an_event() -> JournalEvent:
    return JournalEvent(
        execution="d-1",
        ordinal=1,
        prior="sha256:" + "a" * 64,
        request="r1",
        request_digest="sha256:" + "b" * 64,
        node="plan",
        activation=1,
        prior_state="ready",
        result_state="active",
        transition="work-started",
        actor={"id": "host", "kind": "automation", "role": None},
        time="2025-01-01T00:00:00.000000Z",
        attempt={"id": "a-1", "sequence": 1},
    )
