"""Export and fast integrity verification of the JSON Lines journal format.

``verify_lines`` answers "is this file an untampered journal?" at full speed:
per line it parses, checks the member set, compares against the canonical
re-encoding, re-hashes and follows the chain. It does not re-run the append
rules; ``replay_lines`` does that (slower, per-field strict).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contracts._errors import ErrorCode, ExecsysError, error
from contracts._ids import Digest
from contracts._journal import JOURNAL_FORMAT
from host.journal._chain import ChainCheck
from host.journal._codec import (
    DIGEST_KEY,
    at,
    encode_record,
    loads_json,
    ordinal_of,
    parse_line,
)
from host.journal._template import EVENT_LINE, UNSAFE

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


def _utf8(line: bytes) -> bool:
    """Whether ``line`` is valid UTF-8 (the parser's rule for a line that is not ASCII)."""
    try:
        line.decode()
    except UnicodeDecodeError:
        return False
    return True


def event_members(line: bytes, position: int) -> tuple[dict[str, Any], Digest]:
    """``parse_line`` for an event line, through the same fast path as :func:`verify_lines`.

    Returns the members (``digest`` included) and the digest; any line the fast
    path does not accept goes through ``parse_line``, which raises the exact refusal.
    """
    match = _LINE(line)
    if match is not None:
        start, stop = match.span(2)
        end = match.end(3)
        if len(line.translate(None, UNSAFE)) == end and (line.isascii() or _utf8(line)):
            hasher = hashlib.sha256(line[: start - _CUT])
            hasher.update(line[stop + 1 : end])
            stated = line[start:stop]
            if hasher.hexdigest().encode() == stated:
                members: dict[str, Any] = loads_json(line)
                return members, members[DIGEST_KEY]
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
    # The fast path (decision 0042): a line the event template matches, with no
    # control byte, backslash or DEL and valid UTF-8, is the canonical JSON of an
    # event with exactly the event's members, so it is accepted without being
    # parsed: the digest is taken over the line with its own ``digest`` member cut
    # out, and execution, ordinal and prior are read from the template's groups.
    # Any other line goes through ``parse_line`` and ``ChainCheck``, which raise
    # the exact refusal in the documented order.
    fullmatch, unsafe, sha256 = _LINE, UNSAFE, hashlib.sha256
    try:
        stream = iter(lines)
        for line in stream:
            chain = _header(line)
            break
        if chain is None:
            return _EMPTY
        seen = chain.seen
        execution = chain.execution.encode()
        head = chain.head[7:].encode()
        # Hex digests accepted inline since the last strict line, from ``first``.
        pending: list[bytes] = []
        first = 1
        position = 0
        for line in stream:
            position += 1
            match = fullmatch(line)
            if match is not None:
                # The line before and after the digest member (the bytes the
                # digest covers), the digest's hex, execution, ordinal, prior.
                low, stated, high, name, ordinal, prior = match.groups()
                if (
                    prior == head
                    and int(ordinal) == position
                    and name == execution
                    and len(line.translate(None, unsafe)) == match.end(3)
                    and (line.isascii() or _utf8(line))
                ):
                    hasher = sha256(low)
                    hasher.update(high)
                    if hasher.hexdigest().encode() == stated:
                        pending.append(stated)
                        head = stated
                        continue
            # The exact refusal (or a line outside the template), from the same
            # checks in their documented order.
            for offset, accepted in enumerate(pending):
                seen["sha256:" + accepted.decode()] = first + offset
            pending.clear()
            chain.resume(Digest("sha256:" + head.decode()), position - 1)
            members, digest = parse_line(line, position)
            if members["record"] != "event":
                raise error(
                    ErrorCode.JOURNAL_MALFORMED_RECORD,
                    "a header may only be the first record",
                    path=at(position),
                )
            chain.event(members["execution"], members["ordinal"], members["prior"], digest)
            head = digest[7:].encode()
            first = position + 1
        chain.resume(Digest("sha256:" + head.decode()), position)
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


_LINE = re.compile(EVENT_LINE.pattern + rb"\n?").fullmatch
"""The event template, allowing the line's own trailing newline."""
_CUT = len(b',"digest":"sha256:')
"""Bytes of the digest member before its hex (the member ends one byte after it)."""


_EMPTY = VerifyReport(
    ok=False,
    events=0,
    head=None,
    code=ErrorCode.JOURNAL_EMPTY,
    ordinal=0,
    message="the journal has no records",
)
