"""Export and fast integrity verification of the JSON Lines journal format.

``verify_lines`` answers "is this file an untampered journal?" at full speed:
per line it parses, checks the member set, compares against the canonical
re-encoding, re-hashes and follows the chain. It does not re-run the append
rules; ``replay_lines`` does that (slower, per-field strict).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contracts._errors import ErrorCode, ExecsysError, error
from contracts._ids import Digest
from contracts._journal import JOURNAL_FORMAT
from host.journal._chain import ChainCheck
from host.journal._codec import (
    DIGEST_KEY,
    EVENT_KEYS,
    at,
    dumps_canonical,
    encode_record,
    loads_json,
    ordinal_of,
    parse_line,
)

if TYPE_CHECKING:
    from host.journal._journal import Journal


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Outcome of verifying one exported journal."""

    ok: bool
    """Whether every line passed."""
    events: int
    """Events accepted before the first failure (all of them when ``ok``)."""
    head: Digest | None
    """Digest of the last accepted record; None when not even the header passed."""
    code: ErrorCode | None = None
    """The first refusal's code; None when ``ok``."""
    ordinal: int | None = None
    """Where the first refusal is: the event ordinal, 0 for the header line."""
    message: str = ""
    """The first refusal's message."""

    def to_json(self) -> dict[str, Any]:
        """Render the ``journal verify --json`` document."""
        if self.ok:
            return {"ok": True, "events": self.events, "head": self.head}
        code = self.code.value if self.code is not None else None
        return {"ok": False, "code": code, "ordinal": self.ordinal}


def export_lines(journal: Journal) -> Iterator[bytes]:
    """Yield the export of ``journal``: the header line, then events by ordinal.

    Each yielded line is the record's canonical JSON followed by a newline.
    """
    yield encode_record(journal.header) + b"\n"
    for _, _, line in journal.lines_since(0):
        yield line + b"\n"


def _header(line: bytes) -> ChainCheck:
    members, digest = parse_line(line, 0)
    if members.get("record") != "header":
        raise error(ErrorCode.JOURNAL_MISSING_HEADER, "first record is not a header", path=at(0))
    if members.get("format") != JOURNAL_FORMAT or not isinstance(members.get("execution"), str):
        raise error(
            ErrorCode.JOURNAL_MALFORMED_RECORD,
            "header format or execution is invalid",
            path=at(0),
            expected=JOURNAL_FORMAT,
        )
    return ChainCheck(members["execution"], digest)


def _cut_digest(sha256: Any, raw: bytes, cut: int, size: int) -> str:
    """Hex SHA-256 of ``raw`` without its ``,"digest":"..."`` member (``size``: the value's)."""
    hasher = sha256(raw[:cut])
    hasher.update(raw[cut + size + 12 :])
    digest: str = hasher.hexdigest()
    return digest


def event_members(line: bytes, position: int) -> tuple[dict[str, Any], Digest]:
    """``parse_line`` for an event line, through the same fast path as :func:`verify_lines`.

    Returns the members (``digest`` included) and the digest; any line the fast
    path does not accept goes through ``parse_line``, which raises the exact refusal.
    """
    raw = line[:-1] if line[-1:] == b"\n" else line
    try:
        members = loads_json(raw)
        stated = members["digest"]
        cut = raw.find(b',"digest":"' + stated.encode() + b'"')
        if (
            cut > 0
            and members["record"] == "event"
            and dumps_canonical(members) == raw
            and members.keys() == EVENT_KEYS
            and stated[:7] == "sha256:"
            and _cut_digest(hashlib.sha256, raw, cut, len(stated)) == stated[7:]
        ):
            return members, stated
    except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError):
        pass
    members, digest = parse_line(line, position)
    if members["record"] != "event":
        raise error(
            ErrorCode.JOURNAL_MALFORMED_RECORD,
            "a header may only be the first record",
            path=at(position),
        )
    members[DIGEST_KEY] = digest
    return members, digest


def verify_lines(lines: Iterable[bytes]) -> VerifyReport:
    """Verify an exported journal's integrity; never raises for bad data.

    ``lines`` are the file's lines, each with or without its trailing newline.
    The report names the first refusal (code and ordinal) or, on success, the
    number of events and the head digest.
    """
    chain: ChainCheck | None = None
    # The loop below is the fast path of ``parse_line`` written inline: one parse,
    # one canonical re-encoding compared with the line, and the digest taken over
    # the line with its own ``digest`` member cut out (the canonical JSON of the
    # other members, because that member is never the first). Any line it does not
    # accept goes through ``parse_line``, which raises the exact refusal.
    loads, dumps, sha256 = loads_json, dumps_canonical, hashlib.sha256
    event_keys = EVENT_KEYS
    try:
        stream = iter(lines)
        for line in stream:
            chain = _header(line)
            break
        if chain is None:
            return _EMPTY
        execution, head, seen = chain.execution, chain.head, chain.seen
        position = 0
        for line in stream:
            position += 1
            raw = line[:-1] if line[-1:] == b"\n" else line
            try:
                members = loads(raw)
                stated = members["digest"]
                cut = raw.find(b',"digest":"' + stated.encode() + b'"')
                fast = (
                    cut > 0
                    and members["record"] == "event"
                    and dumps(members) == raw
                    and members.keys() == event_keys
                    and stated[:7] == "sha256:"
                    and _cut_digest(sha256, raw, cut, len(stated)) == stated[7:]
                    and members["execution"] == execution
                    and members["ordinal"] == position
                    and type(members["ordinal"]) is int
                    and members["prior"] == head
                )
            except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError):
                fast = False
            if not fast:
                # The exact refusal, from the same checks in their documented order.
                chain.resume(head, position - 1)
                members, stated = parse_line(line, position)
                if members["record"] != "event":
                    raise error(
                        ErrorCode.JOURNAL_MALFORMED_RECORD,
                        "a header may only be the first record",
                        path=at(position),
                    )
                chain.event(members["execution"], members["ordinal"], members["prior"], stated)
            seen[stated] = position
            head = stated
        chain.resume(head, position)
    except ExecsysError as exc:
        return VerifyReport(
            ok=False,
            events=chain.count if chain is not None else 0,
            head=chain.head if chain is not None else None,
            code=exc.code,
            ordinal=ordinal_of(exc),
            message=exc.message,
        )
    return VerifyReport(ok=True, events=chain.count, head=chain.head)


_EMPTY = VerifyReport(
    ok=False,
    events=0,
    head=None,
    code=ErrorCode.JOURNAL_EMPTY,
    ordinal=0,
    message="the journal has no records",
)
