"""The canonical codec: exact bytes, RFC 8785 agreement, strict decoding."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import rfc8785
from hypothesis import given

from contracts import ErrorCode, ExecsysError, canonical_bytes
from contracts._journal import JournalEvent
from host.journal import decode_line, encode_record, ordinal_of, record_digest
from host.journal._codec import _stdlib_dumps, _stdlib_loads, dumps_canonical

from .scenario import happy_journal
from .strategies import events


def reference_line(event: JournalEvent) -> bytes:
    """The stored line computed with the reference RFC 8785 encoder only."""
    fields = event.model_dump(mode="json")
    fields["digest"] = "sha256:" + hashlib.sha256(rfc8785.dumps(fields)).hexdigest()
    return bytes(rfc8785.dumps(fields))


@given(events)
def test_line_is_rfc8785_canonical_json(event: JournalEvent) -> None:
    assert encode_record(event) == reference_line(event)


@given(events)
def test_both_json_backends_agree_with_rfc8785(event: JournalEvent) -> None:
    fields = event.model_dump(mode="json")
    reference = canonical_bytes(fields)
    assert dumps_canonical(fields) == reference
    assert _stdlib_dumps(fields) == reference
    assert _stdlib_loads(reference) == fields


@given(events)
def test_decode_round_trips(event: JournalEvent) -> None:
    line = encode_record(event)
    assert decode_line(line) == event
    assert decode_line(line + b"\n") == event
    assert record_digest(decode_line(line)) == record_digest(event)


def _line() -> bytes:
    return encode_record(happy_journal().events[2])


def _resign(fields: dict[str, Any]) -> bytes:
    fields = {k: v for k, v in fields.items() if k != "digest"}
    fields["digest"] = "sha256:" + hashlib.sha256(rfc8785.dumps(fields)).hexdigest()
    return bytes(rfc8785.dumps(fields))


def _code(line: bytes) -> ErrorCode:
    with pytest.raises(ExecsysError) as caught:
        decode_line(line, 3)
    assert ordinal_of(caught.value) == 3
    return caught.value.code


def test_unknown_member_is_refused() -> None:
    fields = json.loads(_line())
    fields["note"] = "x"
    assert _code(_resign(fields)) is ErrorCode.JOURNAL_UNKNOWN_FIELD


def test_missing_member_is_malformed() -> None:
    fields = json.loads(_line())
    del fields["rationale"]
    assert _code(_resign(fields)) is ErrorCode.JOURNAL_MALFORMED_RECORD


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b.replace(b'{"activation"', b'{ "activation"', 1),
        lambda b: b + b"\r",
        lambda b: b.replace(b'"record":"event"', b'"record":"\\u0065vent"', 1),
    ],
)
def test_noncanonical_bytes_are_refused(mutate: object) -> None:
    assert callable(mutate)
    assert _code(mutate(_line())) is ErrorCode.JOURNAL_NONCANONICAL


def test_reordered_members_are_noncanonical() -> None:
    fields = json.loads(_line())
    reordered = json.dumps(dict(reversed(list(fields.items()))), separators=(",", ":")).encode()
    assert _code(reordered) is ErrorCode.JOURNAL_NONCANONICAL


def test_altered_digest_is_refused() -> None:
    line = _line()
    fields = json.loads(line)
    fields["rationale"] = "changed"
    tampered = rfc8785.dumps(fields)  # digest left as it was
    assert _code(bytes(tampered)) is ErrorCode.JOURNAL_DIGEST_MISMATCH


@pytest.mark.parametrize(
    ("fields_patch", "code"),
    [
        ({"activation": "1"}, ErrorCode.JOURNAL_MALFORMED_RECORD),
        ({"ordinal": 0}, ErrorCode.JOURNAL_MALFORMED_RECORD),
        ({"transition": "teleported"}, ErrorCode.JOURNAL_MALFORMED_RECORD),
        ({"time": "2025-01-01T00:00:00Z"}, ErrorCode.JOURNAL_MALFORMED_RECORD),
        ({"actor": {"id": "x", "kind": "robot", "role": None}}, ErrorCode.JOURNAL_MALFORMED_RECORD),
        (
            {"actor": {"id": "x", "kind": "human", "role": None, "x": 1}},
            ErrorCode.JOURNAL_MALFORMED_RECORD,
        ),
    ],
)
def test_schema_violations_are_malformed(fields_patch: dict[str, object], code: ErrorCode) -> None:
    fields = json.loads(_line())
    fields.update(fields_patch)
    assert _code(_resign(fields)) is code


@pytest.mark.parametrize("raw", [b"", b"[]", b"not json", b"{", b'"x"', b"\xff\xfe"])
def test_garbage_is_malformed(raw: bytes) -> None:
    assert _code(raw) is ErrorCode.JOURNAL_MALFORMED_RECORD


def test_float_where_integer_expected_is_refused() -> None:
    # Signed over the float spelling, so only the schema round trip can catch it.
    fields = json.loads(_line())
    del fields["digest"]
    fields["activation"] = 1.0
    fields["digest"] = "sha256:" + hashlib.sha256(dumps_canonical(fields)).hexdigest()
    assert _code(dumps_canonical(fields)) is ErrorCode.JOURNAL_MALFORMED_RECORD
