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
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True, slots=True)
class Bundle:
    """A parsed bundle whose framing and digest have been checked (its rules have not)."""

    delivery: dict[str, Any]
    """The admitted delivery document (graph, input, authority, executors, nonce)."""
    policy: dict[str, Any]
    """The authority policy the delivery was admitted with."""
    journal: list[bytes]
    """The journal export's lines without newlines: header first."""
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


class _BodyDigest:
    """SHA-256 of a bundle's body, computed beside the caller's own work when it is large.

    hashlib releases the GIL while it hashes a large buffer, so on a second core
    the digest of a big bundle costs no wall time next to the split that follows
    (decision 0133). A small body is hashed inline: a thread would cost more.
    """

    _THREADED = 1 << 20

    def __init__(self, body: memoryview) -> None:
        self._hex = ""
        self._thread: threading.Thread | None = None
        if len(body) < self._THREADED:
            self._hash(body)
        else:
            self._thread = threading.Thread(target=self._hash, args=(body,), daemon=True)
            self._thread.start()

    def _hash(self, body: memoryview) -> None:
        self._hex = hashlib.sha256(body).hexdigest()

    def result(self) -> str:
        """``sha256:HEX``, waiting for the thread when there is one."""
        if self._thread is not None:
            self._thread.join()
        return "sha256:" + self._hex


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
    body = memoryview(data)[: data.rfind(b"\n", 0, len(data) - 1) + 1]  # hashed in place
    digest = _BodyDigest(body)
    try:
        lines = data.split(b"\n")
        lines.pop()  # the empty piece after the final newline
        if len(lines) < 3:
            raise _malformed(
                "too few lines for a bundle", "line 1", expected="meta, journal, trailer"
            )
        trailer = _canonical_object(lines[-1], "trailer")
        if set(trailer) != {"digest", "signature"} or not isinstance(trailer["digest"], str):
            raise _malformed("the trailer is not {digest, signature}", "trailer")
    finally:
        actual = digest.result()
    if trailer["digest"] != actual:
        raise error(
            ErrorCode.BUNDLE_DIGEST_MISMATCH,
            "the bundle's bytes do not match its digest",
            path="trailer",
            expected=actual,
        )
    meta = _canonical_object(lines[0], "line 1")
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
    if len(lines) != 2 + count + size:
        raise _malformed(
            f"{len(lines)} lines for {count} journal and {size} record lines",
            "line 1",
            expected=str(2 + count + size),
        )
    records: dict[str, bytes] | None = {} if mode == INCLUDED else None
    block = lines[1 + count : 1 + count + size]
    digests = _digest_lines(block) if records is None else None
    if digests is None:  # records, or a digest line out of shape: one by one
        digests = [
            _record_line(line, records, f"line {index}")
            for index, line in enumerate(block, start=2 + count)
        ]
    return Bundle(
        delivery=meta["delivery"],
        policy=meta["policy"],
        journal=lines[1 : 1 + count],
        records=records,
        digests=tuple(digests),
        retirement=meta["retirement"],
        digest=Digest(actual),
        signature=trailer["signature"],
    )


_DIGEST_LINE = len(b'{"digest":"') + _DIGEST_LEN + len(b'"}')
_DIGEST_LINES = re.compile(rb'(?:\{"digest":"[^\n]{%d}"\}\n)*+' % _DIGEST_LEN).fullmatch


def _digest_lines(block: list[bytes]) -> list[str] | None:
    """A digests-only bundle's record lines checked as one block (what ``_record_line`` checks).

    None when some line is out of shape: the caller then goes line by line, to
    name it. Each digest is decoded as ``_record_line`` decodes it (one character
    per byte), so the same lines give the same digests.
    """
    text = b"\n".join(block) + b"\n" if block else b""
    if _DIGEST_LINES(text) is None:
        return None
    chars = text.decode("ascii", "replace")
    start, step = len('{"digest":"'), _DIGEST_LINE + 1
    return [chars[at : at + _DIGEST_LEN] for at in range(start, len(chars), step)]


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
