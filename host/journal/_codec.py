"""The strict canonical codec: one record <-> one line of canonical JSON.

Line layout: the RFC 8785 canonical JSON of the record's fields plus one extra
top-level member ``digest``, whose value is the SHA-256 of the canonical JSON
of the fields *without* that member. A line is accepted only if it is exactly
the bytes this module would write for the record it decodes to.

Speed matters because ``journal verify`` re-hashes whole journals, so the JSON
work goes through orjson when it is importable. orjson's compact, key-sorted
output equals RFC 8785 on the journal's value domain (strings, integers up to
2**53 - 1, booleans, null, ASCII member names, no floats); the test suite checks
that equality against the reference ``rfc8785`` encoder. Without orjson the
standard library gives the same bytes, only slower.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from contracts._errors import ErrorCode, ExecsysError, error
from contracts._ids import Digest
from contracts._journal import (
    ActivationRef,
    Actor,
    ActorKind,
    Approval,
    AttemptRef,
    ErrorInfo,
    JournalEvent,
    JournalHeader,
    NodeState,
    RecordRef,
    Transition,
)

JournalRecord = JournalHeader | JournalEvent
"""Either record type."""

DIGEST_KEY = "digest"
"""The line member that carries the record's digest (never covered by it)."""
_DIGEST_NAME = DIGEST_KEY.encode()

HEADER_KEYS: frozenset[str] = frozenset(JournalHeader.model_fields) | {DIGEST_KEY}
"""Exact top-level member set of a header line."""
EVENT_KEYS: frozenset[str] = frozenset(JournalEvent.model_fields) | {DIGEST_KEY}
"""Exact top-level member set of an event line."""


def _stdlib_dumps(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _stdlib_loads(data: bytes) -> Any:
    def no_float(text: str) -> Any:
        raise ValueError(f"number {text} is not an integer")

    def no_constant(text: str) -> Any:
        raise ValueError(f"{text} is not JSON")

    return json.loads(data, parse_float=no_float, parse_constant=no_constant)


def _backend() -> tuple[Callable[[Any], bytes], Callable[[bytes], Any], str]:
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson ships with the langgraph stack
        return _stdlib_dumps, _stdlib_loads, "json"

    sort_keys = orjson.OPT_SORT_KEYS

    def dumps(value: Any) -> bytes:
        return orjson.dumps(value, option=sort_keys)

    return dumps, orjson.loads, "orjson"


dumps_canonical, loads_json, BACKEND = _backend()
"""Canonical encoder, JSON parser and the name of the library behind them."""


def sha256_digest(data: bytes) -> Digest:
    """Return ``sha256:<hex>`` of ``data``."""
    return Digest("sha256:" + hashlib.sha256(data).hexdigest())


# --- fast field builders ----------------------------------------------------------
#
# ``model_dump(mode="json")`` walks pydantic's serializer for every record; the
# journal dumps each event it appends, so these explicit builders produce the
# very same dicts (enum members become their values, tuples become lists,
# every field is present, nulls included) at a fraction of the cost. The test
# suite checks ``event_fields(e) == e.model_dump(mode="json")`` on generated
# events; a field added to a record must be added here too (the same test fails
# otherwise, because the member sets differ).

#: Enum member -> its JSON value (a dict lookup is cheaper than ``.value``).
ENUM_VALUES: dict[object, str] = {
    member: member.value for enum in (NodeState, Transition, ActorKind) for member in enum
}


def ref_fields(ref: RecordRef) -> dict[str, Any]:
    """``model_dump(mode="json")`` of a :class:`RecordRef`."""
    return {"kind": ref.kind, "id": ref.id, "digest": ref.digest}


def actor_fields(actor: Actor) -> dict[str, Any]:
    """``model_dump(mode="json")`` of an :class:`Actor`."""
    return {"id": actor.id, "kind": ENUM_VALUES[actor.kind], "role": actor.role}


def attempt_fields(attempt: AttemptRef | None) -> dict[str, Any] | None:
    """``model_dump(mode="json")`` of an optional :class:`AttemptRef`."""
    if attempt is None:
        return None
    return {"id": attempt.id, "sequence": attempt.sequence}


def approval_fields(approval: Approval) -> dict[str, Any]:
    """``model_dump(mode="json")`` of an :class:`Approval`."""
    return {
        "actor": approval.actor,
        "kind": ENUM_VALUES[approval.kind],
        "role": approval.role,
        "record": ref_fields(approval.record),
    }


def error_fields(info: ErrorInfo | None) -> dict[str, Any] | None:
    """``model_dump(mode="json")`` of an optional :class:`ErrorInfo`."""
    if info is None:
        return None
    return {"code": info.code, "message": info.message}


def activation_fields(ref: ActivationRef) -> dict[str, Any]:
    """``model_dump(mode="json")`` of an :class:`ActivationRef`."""
    return {"node": ref.node, "activation": ref.activation}


def event_fields(event: JournalEvent) -> dict[str, Any]:
    """Return exactly ``event.model_dump(mode="json")``, built field by field."""
    authorization = event.authorization
    batch = event.batch
    invalidation = event.invalidation
    successor = event.successor
    return {
        "record": event.record,
        "execution": event.execution,
        "ordinal": event.ordinal,
        "prior": event.prior,
        "request": event.request,
        "request_digest": event.request_digest,
        "node": event.node,
        "activation": event.activation,
        "prior_state": ENUM_VALUES[event.prior_state],
        "result_state": ENUM_VALUES[event.result_state],
        "transition": ENUM_VALUES[event.transition],
        "actor": actor_fields(event.actor),
        "time": event.time,
        "rationale": event.rationale,
        "attempt": attempt_fields(event.attempt),
        "refs": [ref_fields(ref) for ref in event.refs],
        "authorization": None if authorization is None else ref_fields(authorization),
        "approvals": [approval_fields(approval) for approval in event.approvals],
        "error": error_fields(event.error),
        "predecessors": [activation_fields(ref) for ref in event.predecessors],
        "batch": None if batch is None else {"index": batch.index, "size": batch.size},
        "invalidation": (
            None
            if invalidation is None
            else {"source": ref_fields(invalidation.source), "policy": invalidation.policy}
        ),
        "successor": (
            None
            if successor is None
            else {"execution": successor.execution, "header": successor.header}
        ),
    }


def record_fields(record: JournalRecord) -> dict[str, Any]:
    """Return the JSON-native fields of ``record`` (every field, nulls included).

    Equal to ``record.model_dump(mode="json")``; events take the fast builder.
    """
    if type(record) is JournalEvent:
        return event_fields(record)
    return record.model_dump(mode="json")


def record_digest(record: JournalRecord) -> Digest:
    """Return the digest of ``record``: SHA-256 of the canonical JSON of its fields."""
    return sha256_digest(dumps_canonical(record_fields(record)))


def encode_record_with_digest(record: JournalRecord) -> tuple[Digest, bytes]:
    """Return ``(record_digest(record), encode_record(record))``, dumping the fields once."""
    fields = record_fields(record)
    digest = sha256_digest(dumps_canonical(fields))
    fields[DIGEST_KEY] = digest
    return digest, dumps_canonical(fields)


def encode_split(low: dict[str, Any], high: dict[str, Any]) -> tuple[Digest, bytes]:
    """Digest and stored line of a record whose fields come as two halves.

    ``low`` holds the members that sort before ``digest``, ``high`` those that
    sort after it. Canonical JSON of an object is its members in sorted order,
    so the record's canonical JSON is the two halves joined, and the stored
    line is the same with ``"digest":...`` between them: one dump per half
    instead of dumping the whole record twice.
    """
    left = dumps_canonical(low)[:-1] if low else b"{"  # '{...' without its '}'
    right = dumps_canonical(high)[1:] if high else b"}"  # '...}' without its '{'
    hasher = hashlib.sha256(left)
    if low and high:
        hasher.update(b",")
    hasher.update(right)
    digest = Digest("sha256:" + hasher.hexdigest())
    member = b'"' + _DIGEST_NAME + b'":"' + digest.encode() + b'"'
    if low and high:
        line = b",".join((left, member, right))
    else:
        line = b"".join((left, b"," if low else b"", member, b"," if high else b"", right))
    return digest, line


def encode_fields(fields: dict[str, Any]) -> tuple[Digest, bytes]:
    """Digest and stored line of a record given as its JSON fields (``record_fields``)."""
    return encode_split(
        {key: value for key, value in fields.items() if key < DIGEST_KEY},
        {key: value for key, value in fields.items() if key > DIGEST_KEY},
    )


def encode_record(record: JournalRecord) -> bytes:
    """Return the stored line of ``record`` (canonical JSON with ``digest``; no newline)."""
    return encode_record_with_digest(record)[1]


def at(position: int) -> str:
    """Return the error ``path`` for a journal position (0 is the header)."""
    return f"ordinal {position}"


def ordinal_of(exc: ExecsysError) -> int | None:
    """Return the journal position a journal error points at, if it names one.

    Journal errors always use ``path="ordinal K"`` where K is the event ordinal
    (0 for the header line); this reads K back.
    """
    prefix = "ordinal "
    if exc.path.startswith(prefix) and exc.path[len(prefix) :].isdigit():
        return int(exc.path[len(prefix) :])
    return None


def strip_newline(line: bytes) -> bytes:
    """Drop one trailing newline byte; any other trailing byte is part of the record."""
    return line[:-1] if line.endswith(b"\n") else line


def parse_line(line: bytes, position: int) -> tuple[dict[str, Any], Digest]:
    """Parse and check one line's framing; return its members and its digest.

    Checks, in order: JSON object (MALFORMED), member set (UNKNOWN_FIELD,
    MALFORMED), canonical bytes (NONCANONICAL), digest (DIGEST_MISMATCH). The
    returned members no longer contain ``digest``.
    """
    raw = strip_newline(line)
    try:
        members = loads_json(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise error(
            ErrorCode.JOURNAL_MALFORMED_RECORD, f"not JSON: {exc}", path=at(position)
        ) from None
    if not isinstance(members, dict):
        raise error(
            ErrorCode.JOURNAL_MALFORMED_RECORD, "a record is a JSON object", path=at(position)
        )
    keys = EVENT_KEYS if members.get("record") == "event" else HEADER_KEYS
    if members.keys() != keys:
        unknown = sorted(members.keys() - keys)
        if unknown:
            raise error(
                ErrorCode.JOURNAL_UNKNOWN_FIELD,
                f"unknown member {unknown[0]!r}",
                path=at(position),
                expected=", ".join(sorted(keys)),
            )
        raise error(
            ErrorCode.JOURNAL_MALFORMED_RECORD,
            f"missing member {sorted(keys - members.keys())[0]!r}",
            path=at(position),
        )
    if dumps_canonical(members) != raw:
        raise error(
            ErrorCode.JOURNAL_NONCANONICAL,
            "line is not the RFC 8785 canonical JSON of its record",
            path=at(position),
        )
    stated = members.pop(DIGEST_KEY)
    digest = sha256_digest(dumps_canonical(members))
    if digest != stated:
        raise error(
            ErrorCode.JOURNAL_DIGEST_MISMATCH,
            "digest does not match the record",
            path=at(position),
            expected=digest,
        )
    return members, digest


def decode_line(line: bytes, position: int = 0) -> JournalRecord:
    """Strictly decode one stored line into a header or an event.

    ``position`` only labels errors (``path="ordinal <position>"``). Refusals:
    JOURNAL_MALFORMED_RECORD, JOURNAL_UNKNOWN_FIELD, JOURNAL_NONCANONICAL,
    JOURNAL_DIGEST_MISMATCH. The decoded record re-encodes to exactly ``line``.
    """
    members, _ = parse_line(line, position)
    model: type[JournalHeader] | type[JournalEvent]
    model = JournalEvent if members.get("record") == "event" else JournalHeader
    try:
        record = model.model_validate(members)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise error(
            ErrorCode.JOURNAL_MALFORMED_RECORD,
            f"{where}: {first['msg']}",
            path=at(position),
        ) from None
    # Lax validation may coerce (e.g. "1" -> 1); insisting on an exact
    # round trip means a decoded record always stands for exactly its bytes.
    if encode_record(record) != strip_newline(line):
        raise error(
            ErrorCode.JOURNAL_MALFORMED_RECORD,
            "record does not round-trip through its schema",
            path=at(position),
        )
    return record
