"""The audit bundle: one self-contained file from which a delivery can be audited offline.

Layout (every line canonical JSON, each followed by a newline)::

    {"bundle": FORMAT, "delivery": {...}, "policy": {...}, "journal": N,
     "records": "included" | "digests", "count": M, "retirement": {...} | null}
    <the N lines of the journal export: header, then events by ordinal>
    <M record lines: {"digest": D, "value": V}, or {"digest": D} with digests only>
    {"digest": "sha256:...", "signature": {...} | null}

The trailer's ``digest`` is the SHA-256 of every byte before the trailer, so a
change to any byte of the file is caught before any rule is read; the optional
Ed25519 signature signs that digest. Journal lines are kept byte for byte, so
the chain is checked by the same code as ``journal verify``. A record line's
value bytes are the RFC 8785 encoding whose SHA-256 is the record's digest.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, overload

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from contracts._canonical import canonical_bytes
from contracts._errors import ErrorCode, ExecsysError, error
from contracts._ids import Digest
from host.journal._codec import loads_json, strip_newline
from host.journal._signing import sign_digest

BUNDLE_FORMAT = "execution-system/audit-bundle/v1"
"""The value of ``bundle`` in the first line of every bundle this version writes."""

INCLUDED = "included"
DIGESTS = "digests"
_META_KEYS = frozenset(
    {"bundle", "delivery", "policy", "journal", "records", "count", "retirement"}
)
_DIGEST_LEN = len("sha256:") + 64
_DIGEST_LINE = len(b'{"digest":""}\n') + _DIGEST_LEN
"""The length of a digests-only record line with its newline."""
_DIGEST_LINES: Final = re.compile(rb'(?:\{"digest":"sha256:[0-9a-f]{64}"\}\n)*+').fullmatch
"""A run of well-formed digests-only record lines (the common case, checked in one match)."""


class JournalLines(Sequence[bytes]):
    """Journal lines left in place in the bytes they were read from, without a copy per line.

    Line ``i`` is ``data[starts[i] : starts[i + 1] - 1]`` (the byte before the
    next line's start is its newline), so a pattern can match it where it lies
    (``pattern.fullmatch(data, start, end)``). Indexing copies one line out;
    slicing gives a list of them.
    """

    __slots__ = ("data", "starts")

    def __init__(self, data: bytes, starts: list[int]) -> None:
        self.data = data
        self.starts = starts
        """Where each line begins, then where the line after the last one would."""

    @classmethod
    def of(cls, lines: Iterable[bytes]) -> JournalLines:
        """Lines given one by one, joined into one buffer (each keeps its bytes exactly)."""
        lines = list(lines)
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line) + 1)
        return cls(b"".join(line + b"\n" for line in lines), starts)

    def __len__(self) -> int:
        return len(self.starts) - 1

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...
    def __getitem__(self, index: int | slice) -> bytes | list[bytes]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("journal line index out of range")
        return self.data[self.starts[index] : self.starts[index + 1] - 1]


@dataclass(frozen=True, slots=True)
class Bundle:
    """A parsed bundle whose framing and digest have been checked (its rules have not)."""

    delivery: dict[str, Any]
    """The admitted delivery document (graph, input, authority, executors, nonce)."""
    policy: dict[str, Any]
    """The authority policy the delivery was admitted with."""
    journal: JournalLines
    """The journal export's lines without newlines, in place in the bundle: header first."""
    records: dict[str, bytes] | None
    """Digest -> the record's canonical value bytes; None when only digests were exported."""
    digests: tuple[str, ...]
    """Every record digest the bundle lists, in file order."""
    retirement: dict[str, Any] | None
    """The retirement fact when the delivery was retired (its records are gone then)."""
    digest: Digest
    """SHA-256 of every byte before the trailer."""
    signature: Any
    """The trailer's ``signature`` member (None when unsigned; checked by the audit)."""


def referenced_digests(lines: Iterable[bytes], seen: dict[str, None] | None = None) -> list[str]:
    """Every record digest the journal's events reference, in order of first reference.

    Outputs, selections and conduct records (``refs``), approval records, retry
    authorizations and invalidation sources. ``seen`` holds the references of
    earlier lines already noted (:func:`note_references`), and is extended.
    """
    seen = {} if seen is None else seen
    for line in lines:
        try:
            members = loads_json(line)
        except (ValueError, UnicodeDecodeError):
            continue  # not a record: the audit's pass over the events refuses it
        if isinstance(members, dict) and members.get("record") == "event":
            try:
                note_references(seen, members)
            except (KeyError, TypeError, AttributeError):
                continue  # likewise: an event without well-formed references
    return list(seen)


def note_references(seen: dict[str, None], event: dict[str, Any]) -> None:
    """Add the record digests one event's fields reference to ``seen``, in order."""
    for ref in event["refs"]:
        seen.setdefault(ref["digest"])
    for approval in event["approvals"]:
        seen.setdefault(approval["record"]["digest"])
    if event["authorization"] is not None:
        seen.setdefault(event["authorization"]["digest"])
    if event["invalidation"] is not None:
        seen.setdefault(event["invalidation"]["source"]["digest"])


def encode_bundle(
    delivery: dict[str, Any],
    lines: list[bytes],
    record: Callable[[str], Any] | None,
    *,
    retirement: dict[str, Any] | None = None,
    key: Ed25519PrivateKey | None = None,
) -> bytes:
    """Write a bundle: ``record(digest)`` loads each referenced record (None: digests only)."""
    journal = [strip_newline(line) for line in lines]
    digests = referenced_digests(journal)
    meta = {
        "bundle": BUNDLE_FORMAT,
        "delivery": delivery,
        "policy": delivery.get("authority") or {},
        "journal": len(journal),
        "records": DIGESTS if record is None else INCLUDED,
        "count": len(digests),
        "retirement": retirement,
    }
    parts = [canonical_bytes(meta), *journal]
    for digest in digests:
        if record is None:
            parts.append(b'{"digest":"' + digest.encode() + b'"}')
        else:
            value = canonical_bytes(record(digest))
            parts.append(b'{"digest":"' + digest.encode() + b'","value":' + value + b"}")
    body = b"".join(part + b"\n" for part in parts)
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    signature = sign_digest(key, digest) if key is not None else None
    return body + canonical_bytes({"digest": digest, "signature": signature}) + b"\n"


def _malformed(message: str, where: str, expected: str = "") -> ExecsysError:
    return error(ErrorCode.BUNDLE_MALFORMED, message, path=where, expected=expected)


def _canonical_object(line: bytes, where: str) -> dict[str, Any]:
    try:
        value = loads_json(line)
    except (ValueError, UnicodeDecodeError):
        raise _malformed("not JSON", where) from None
    if not isinstance(value, dict):
        raise _malformed("not a JSON object", where)
    try:
        canonical = canonical_bytes(value)
    except (TypeError, ValueError):
        raise _malformed("not canonical JSON", where) from None
    if canonical != line:
        raise error(
            ErrorCode.BUNDLE_NONCANONICAL,
            "line is not the RFC 8785 canonical JSON of its value",
            path=where,
        )
    return value


def parse_bundle(data: bytes) -> Bundle:
    """Split and check a bundle's framing and digest; raise the first problem found.

    Codes: BUNDLE_MALFORMED (layout), BUNDLE_NONCANONICAL (a meta, record or
    trailer line not canonical), BUNDLE_DIGEST_MISMATCH (any byte changed).
    Journal lines are returned unchecked: the audit verifies them.
    """
    if not data.endswith(b"\n"):
        raise _malformed("a bundle ends with a newline", "trailer")
    # Lines are found where they lie, not split out (a copy of every byte).
    total = data.count(b"\n")
    if total < 3:
        raise _malformed("too few lines for a bundle", "line 1", expected="meta, journal, trailer")
    last = data.rfind(b"\n", 0, len(data) - 1) + 1  # where the trailer begins
    trailer = _canonical_object(data[last:-1], "trailer")
    if set(trailer) != {"digest", "signature"} or not isinstance(trailer["digest"], str):
        raise _malformed("the trailer is not {digest, signature}", "trailer")
    body = memoryview(data)[:last]  # hashed in place, not copied
    actual = "sha256:" + hashlib.sha256(body).hexdigest()
    if trailer["digest"] != actual:
        raise error(
            ErrorCode.BUNDLE_DIGEST_MISMATCH,
            "the bundle's bytes do not match its digest",
            path="trailer",
            expected=actual,
        )
    first = data.index(b"\n") + 1  # where the journal begins
    meta = _canonical_object(data[: first - 1], "line 1")
    if meta.keys() != _META_KEYS or meta["bundle"] != BUNDLE_FORMAT:
        raise _malformed("not a bundle header", "line 1", expected=BUNDLE_FORMAT)
    count, size, mode = meta["journal"], meta["count"], meta["records"]
    if (
        type(count) is not int
        or type(size) is not int
        or count < 1
        or size < 0
        or mode not in (INCLUDED, DIGESTS)
        or not isinstance(meta["delivery"], dict)
        or not isinstance(meta["policy"], dict)
        or not (meta["retirement"] is None or isinstance(meta["retirement"], dict))
    ):
        raise _malformed("bundle header members are invalid", "line 1")
    if total != 2 + count + size:
        raise _malformed(
            f"{total} lines for {count} journal and {size} record lines",
            "line 1",
            expected=str(2 + count + size),
        )
    starts = [first]
    find, start = data.find, first
    for _ in range(count):
        start = find(b"\n", start) + 1
        starts.append(start)
    records: dict[str, bytes] | None = {} if mode == INCLUDED else None
    digests: list[str]
    if (
        records is None
        and last - start == size * _DIGEST_LINE
        and _DIGEST_LINES(data, start, last) is not None
    ):
        listed = data[start:last].decode("ascii")
        head = len('{"digest":"')
        digests = [listed[at : at + _DIGEST_LEN] for at in range(head, len(listed), _DIGEST_LINE)]
    else:
        digests = []
        lines = data[start:last].split(b"\n")[:size]
        for index, line in enumerate(lines, start=2 + count):
            digests.append(_record_line(line, records, f"line {index}"))
    return Bundle(
        delivery=meta["delivery"],
        policy=meta["policy"],
        journal=JournalLines(data, starts),
        records=records,
        digests=tuple(digests),
        retirement=meta["retirement"],
        digest=Digest(actual),
        signature=trailer["signature"],
    )


def _record_line(line: bytes, records: dict[str, bytes] | None, where: str) -> str:
    """One record line: checked by layout, not re-encoded (its value is hashed by the audit)."""
    head = b'{"digest":"'
    if not line.startswith(head) or len(line) < len(head) + _DIGEST_LEN + 2:
        raise _malformed("not a record line", where, expected='{"digest": ...}')
    digest = line[len(head) : len(head) + _DIGEST_LEN].decode("ascii", "replace")
    rest = line[len(head) + _DIGEST_LEN :]
    if records is None:
        if rest != b'"}':
            raise _malformed("a digests-only bundle lists digests alone", where)
        return digest
    if not rest.startswith(b'","value":') or not rest.endswith(b"}"):
        raise _malformed("a record line is {digest, value}", where)
    if digest in records:
        raise _malformed(f"record {digest} is listed twice", where)
    records[digest] = rest[len(b'","value":') : -1]
    return digest
