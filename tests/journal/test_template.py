"""The event-line template lets verify skip parsing; it must never accept more.

``verify_lines`` accepts a line the template matches without parsing or
re-encoding it (``host/journal/_template.py``). These tests pin both halves:
the Journal's own lines take that path, and every line it accepts is one the
strict path (``parse_line`` + ``ChainCheck``) accepts too, with the same head.
The forgeries carry a self-consistent digest (taken over their own bytes), so
only the canonical-form rules can tell them apart, which is exactly what the
fast path must not skip.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import ErrorCode
from contracts._errors import ExecsysError
from contracts._journal import JournalEvent
from host.journal import encode_record, export_lines, verify_lines
from host.journal._codec import ordinal_of, parse_line
from host.journal._template import EVENT_LINE, EVENT_MEMBERS, UNSAFE
from host.journal._verify import _header, event_members

from .scenario import happy_journal
from .strategies import events

HAPPY = happy_journal()
LINES = list(export_lines(HAPPY))
_MEMBER = re.compile(rb',"digest":"sha256:([0-9a-f]{64})"')


def strict(lines: Sequence[bytes]) -> tuple[bool, int, str | None, ErrorCode | None, int | None]:
    """The reference verifier: every line through ``parse_line`` and ``ChainCheck``."""
    try:
        chain = _header(lines[0])
    except ExecsysError as exc:
        return False, 0, None, exc.code, ordinal_of(exc)
    try:
        for position, line in enumerate(lines[1:], start=1):
            members, digest = parse_line(line, position)
            if members["record"] != "event":
                return False, chain.count, chain.head, ErrorCode.JOURNAL_MALFORMED_RECORD, position
            chain.event(members["execution"], members["ordinal"], members["prior"], digest)
    except ExecsysError as exc:
        return False, chain.count, chain.head, exc.code, ordinal_of(exc)
    return True, chain.count, chain.head, None, None


def fast(lines: Sequence[bytes]) -> tuple[bool, int, str | None, ErrorCode | None, int | None]:
    report = verify_lines(lines)
    return report.ok, report.events, report.head, report.code, report.ordinal


def forge(line: bytes) -> bytes:
    """``line`` with its digest member re-taken over its own bytes (a forger's digest)."""
    found = _MEMBER.search(line)
    assert found is not None
    body = line[: found.start()] + line[found.end() :]
    body = body[:-1] if body.endswith(b"\n") else body
    hexdigest = hashlib.sha256(body).hexdigest().encode()
    return line[: found.start(1)] + hexdigest + line[found.end(1) :]


def test_template_covers_every_event_member() -> None:
    assert set(EVENT_MEMBERS) == set(JournalEvent.model_fields)


def test_the_journals_own_lines_take_the_fast_path() -> None:
    # If the template stopped matching what the writer produces, verify would
    # still be right but silently slow; this is the test that notices.
    for line in LINES[1:]:
        raw = line.rstrip(b"\n")
        assert EVENT_LINE.fullmatch(raw) is not None, raw
        assert raw.translate(None, UNSAFE) == raw


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(events)
def test_generated_events_match_unless_they_need_escapes(event: JournalEvent) -> None:
    line = encode_record(event)
    matched = EVENT_LINE.fullmatch(line) is not None
    if line.translate(None, UNSAFE) == line:
        assert matched, line
    members, digest = event_members(line, 1)
    strict_members, strict_digest = parse_line(line, 1)
    assert (members, digest) == ({**strict_members, "digest": strict_digest}, strict_digest)


# Each forgery: (what changes, replacement applied to the first event line, the code).
FORGERIES = [
    ("space after a comma", (b',"actor":', b', "actor":'), ErrorCode.JOURNAL_NONCANONICAL),
    ("space before a colon", (b'"actor":', b'"actor" :'), ErrorCode.JOURNAL_NONCANONICAL),
    ("tab between members", (b',"actor":', b',\t"actor":'), ErrorCode.JOURNAL_NONCANONICAL),
    ("trailing space", (b"}\n", b"} \n"), ErrorCode.JOURNAL_NONCANONICAL),
    ("CR before the newline", (b"}\n", b"}\r\n"), ErrorCode.JOURNAL_NONCANONICAL),
    (
        "nested members out of order",
        (b'"kind":"automation","role":null', b'"role":null,"kind":"automation"'),
        ErrorCode.JOURNAL_NONCANONICAL,
    ),
    ("escaped letter", (b'"node":"', b'"node":"\\u0070'), ErrorCode.JOURNAL_NONCANONICAL),
    ("escaped solidus", (b'"rationale":"', b'"rationale":"\\/'), ErrorCode.JOURNAL_NONCANONICAL),
    ("negative zero", (b'"sequence":1', b'"sequence":-0'), ErrorCode.JOURNAL_NONCANONICAL),
    ("exponent", (b'"sequence":1', b'"sequence":1e0'), ErrorCode.JOURNAL_NONCANONICAL),
    (
        "fraction with a trailing zero",
        (b'"sequence":1', b'"sequence":1.00'),
        ErrorCode.JOURNAL_NONCANONICAL,
    ),
    (
        "raw tab in a string",
        (b'"rationale":"', b'"rationale":"\t'),
        ErrorCode.JOURNAL_MALFORMED_RECORD,
    ),
    (
        "raw control byte in a string",
        (b'"rationale":"', b'"rationale":"\x01'),
        ErrorCode.JOURNAL_MALFORMED_RECORD,
    ),
    (
        "raw newline in a string",
        (b'"rationale":"', b'"rationale":"\n'),
        ErrorCode.JOURNAL_MALFORMED_RECORD,
    ),
    ("invalid UTF-8", (b'"rationale":"', b'"rationale":"\xff'), ErrorCode.JOURNAL_MALFORMED_RECORD),
    (
        "encoded surrogate",
        (b'"rationale":"', b'"rationale":"\xed\xa0\x80'),
        ErrorCode.JOURNAL_MALFORMED_RECORD,
    ),
    ("duplicate member", (b',"node":"', b',"node":"x","node":"'), ErrorCode.JOURNAL_NONCANONICAL),
    ("leading zero", (b'"sequence":1', b'"sequence":01'), ErrorCode.JOURNAL_MALFORMED_RECORD),
]


def _forged(replacement: tuple[bytes, bytes], index: int = 2) -> list[bytes]:
    old, new = replacement
    lines = list(LINES)
    assert old in lines[index], old
    lines[index] = forge(lines[index].replace(old, new, 1))
    return lines


@pytest.mark.parametrize(("what", "replacement", "code"), FORGERIES, ids=[f[0] for f in FORGERIES])
def test_noncanonical_lines_fail_with_their_code(
    what: str, replacement: tuple[bytes, bytes], code: ErrorCode
) -> None:
    lines = _forged(replacement)
    assert _MEMBER.search(lines[2]) is not None, what
    assert fast(lines) == strict(lines)
    assert (verify_lines(lines).code, verify_lines(lines).ordinal) == (code, 2)


@pytest.mark.parametrize(
    "replacement",
    [
        (b'"rationale":"', b'"rationale":"\xc3\xa9\xe2\x80\xa8'),  # non-ASCII, canonical as is
        (b'"rationale":"', b'"rationale":"\x7f'),  # DEL needs no escape, but skips the template
        (b'"rationale":"', b'"rationale":"\\"'),  # an escape the canonical form keeps
        (b'"sequence":1', b'"sequence":1.5'),  # a fraction the strict path lets through
    ],
)
def test_lines_outside_the_template_agree_with_the_strict_path(
    replacement: tuple[bytes, bytes],
) -> None:
    # Canonical by the strict path's rule, but not all in the template's shape:
    # the fast path must hand them on, and the answer is the strict path's.
    lines = _forged(replacement)
    # Re-chain the rest so the forged line's verdict decides the whole journal.
    for index in range(3, len(lines)):
        previous = parse_line(lines[index - 1], index - 1)[1]
        chained = re.sub(
            rb'"prior":"sha256:[0-9a-f]{64}"', b'"prior":"' + previous.encode() + b'"', lines[index]
        )
        lines[index] = forge(chained)
    assert fast(lines) == strict(lines)
    assert verify_lines(lines).ok


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_any_forged_byte_change_gets_the_strict_verdict(data: st.DataObject) -> None:
    index = data.draw(st.integers(min_value=1, max_value=len(LINES) - 1))
    line = LINES[index]
    found = _MEMBER.search(line)
    assert found is not None
    # Change one byte outside the digest member, then forge the digest over it.
    spots = [i for i in range(len(line) - 1) if not found.start() <= i < found.end()]
    at = data.draw(st.sampled_from(spots))
    value = data.draw(st.integers(min_value=0, max_value=255).filter(lambda b: b != line[at]))
    changed = line[:at] + bytes([value]) + line[at + 1 :]
    lines = list(LINES)
    lines[index] = forge(changed) if _MEMBER.search(changed) else changed
    assert fast(lines) == strict(lines)


def test_unforged_lines_agree_too() -> None:
    assert fast(LINES) == strict(LINES)
    assert fast(LINES)[0]
    without_newlines = [line.rstrip(b"\n") for line in LINES]
    assert fast(without_newlines) == strict(without_newlines)
