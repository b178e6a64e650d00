"""A byte template of the canonical event line, so verify can skip the re-encode.

``parse_line`` proves a line canonical by parsing it and comparing the line
with the canonical re-encoding of what it parsed to. That costs a parse and a
dump per line. This module proves the same thing for the lines the Journal
writes without either: :data:`EVENT_LINE` is a regular expression that matches
only lines that *are* canonical JSON of an event with exactly the event's
member set, in the writer's shape.

Why a match implies canonical (each part is tested against ``parse_line``):

* the members of every object appear as literal text in sorted order, each
  once, with no whitespace anywhere outside strings;
* a string is ``"`` + any bytes but ``"`` + ``"``, and :data:`UNSAFE` (checked
  by the caller with one ``bytes.translate``) rules out backslashes and
  control bytes: with no escape at all, a string's canonical spelling is its
  own bytes. Lines that are not ASCII must also decode as UTF-8;
* an integer is ``0`` or a digit 1-9 followed by at most 15 digits (no sign,
  no fraction, no exponent, far below the parser's 64-bit limit);
* ``null`` is the only other scalar.

The converse does not hold and need not: a canonical line in another shape
(a member of a record the writer never nests, a negative number, an escape)
just fails to match, and the caller takes the strict path, which decides.
Every quantifier is possessive and every alternative starts with a distinct
byte, so matching is linear in the line's length whatever the input.
"""

from __future__ import annotations

import re
from typing import Final

from contracts._journal import JournalEvent

_STR = rb'"[^"]*+"'
_INT = rb"(?:0|[1-9][0-9]{0,15}+)"
_HEX = rb"([^\"]*+)"


def _obj(*members: tuple[str, bytes]) -> bytes:
    keys = [key for key, _ in members]
    if keys != sorted(keys) or len(set(keys)) != len(keys):  # pragma: no cover - a typo guard
        raise ValueError(f"object members out of canonical order: {keys}")
    body = b",".join(b'"' + key.encode() + b'":' + value for key, value in members)
    return rb"\{" + body + rb"\}"


def _nullable(shape: bytes) -> bytes:
    return rb"(?>null|" + shape + rb")"


def _array(item: bytes) -> bytes:
    return rb"\[(?>" + item + rb"(?>," + item + rb")*+)?+\]"


_REF = _obj(("digest", _STR), ("id", _STR), ("kind", _STR))

#: Value template of each event member (``digest`` is spliced in separately).
EVENT_MEMBERS: Final[dict[str, bytes]] = {
    "activation": _INT,
    "actor": _obj(("id", _STR), ("kind", _STR), ("role", _nullable(_STR))),
    "approvals": _array(_obj(("actor", _STR), ("kind", _STR), ("record", _REF), ("role", _STR))),
    "attempt": _nullable(_obj(("id", _STR), ("sequence", _INT))),
    "authorization": _nullable(_REF),
    "batch": _nullable(_obj(("index", _INT), ("size", _INT))),
    "error": _nullable(_obj(("code", _STR), ("message", _STR))),
    "execution": rb'"([^"]*+)"',
    "invalidation": _nullable(_obj(("policy", _STR), ("source", _REF))),
    "node": _STR,
    "ordinal": rb"(0|[1-9][0-9]{0,15}+)",
    "predecessors": _array(_obj(("activation", _INT), ("node", _STR))),
    "prior": rb'"sha256:' + _HEX + rb'"',
    "prior_state": _STR,
    "rationale": _STR,
    "record": rb'"event"',
    "refs": _array(_REF),
    "request": _STR,
    "request_digest": _STR,
    "result_state": _STR,
    "successor": _nullable(_obj(("execution", _STR), ("header", _STR))),
    "time": _STR,
    "transition": _STR,
}


def _event_line() -> re.Pattern[bytes]:
    if set(EVENT_MEMBERS) != set(JournalEvent.model_fields):  # pragma: no cover
        raise ValueError("the event line template does not cover the event's members")
    keys = sorted(EVENT_MEMBERS)
    low = [key for key in keys if key < "digest"]
    high = [key for key in keys if key > "digest"]
    low_body = b",".join(b'"' + k.encode() + b'":' + EVENT_MEMBERS[k] for k in low)
    high_body = b",".join(b'"' + k.encode() + b'":' + EVENT_MEMBERS[k] for k in high)
    # Groups: 1 the line before the digest member, 2 the digest's hex, 3 the line
    # after it (so 1 + 3 is the record's canonical JSON), 4 execution, 5 ordinal,
    # 6 the prior digest's hex.
    pattern = rb"(\{" + low_body + rb'),"digest":"sha256:' + _HEX + rb'"(,' + high_body + rb"\})"
    return re.compile(pattern)


EVENT_LINE: Final[re.Pattern[bytes]] = _event_line()
"""Matches (``fullmatch``) a canonical event line of the writer's shape; see the module doc."""

UNSAFE: Final[bytes] = bytes(range(0x20)) + b"\\\x7f"
"""Bytes a templated line may not contain: controls, backslash and DEL (``translate`` deletes)."""
