"""Export and fast integrity verification of the JSON Lines journal format.

``verify_lines`` answers "is this file an untampered journal?" at full speed:
per line it parses, checks the member set, compares against the canonical
re-encoding, re-hashes and follows the chain. It does not re-run the append
rules; ``replay_lines`` does that (slower, per-field strict).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contracts._errors import ErrorCode, ExecsysError, error
from contracts._ids import Digest
from contracts._journal import JOURNAL_FORMAT
from host.journal._chain import ChainCheck
from host.journal._codec import at, encode_record, ordinal_of, parse_line

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


def verify_lines(lines: Iterable[bytes]) -> VerifyReport:
    """Verify an exported journal's integrity; never raises for bad data.

    ``lines`` are the file's lines, each with or without its trailing newline.
    The report names the first refusal (code and ordinal) or, on success, the
    number of events and the head digest.
    """
    chain: ChainCheck | None = None
    try:
        for line in lines:
            if chain is None:
                chain = _header(line)
                continue
            position = chain.count + 1
            members, digest = parse_line(line, position)
            if members["record"] != "event":
                raise error(
                    ErrorCode.JOURNAL_MALFORMED_RECORD,
                    "a header may only be the first record",
                    path=at(position),
                )
            chain.event(members["execution"], members["ordinal"], members["prior"], digest)
    except ExecsysError as exc:
        return VerifyReport(
            ok=False,
            events=chain.count if chain is not None else 0,
            head=chain.head if chain is not None else None,
            code=exc.code,
            ordinal=ordinal_of(exc),
            message=exc.message,
        )
    if chain is None:
        return VerifyReport(
            ok=False,
            events=0,
            head=None,
            code=ErrorCode.JOURNAL_EMPTY,
            ordinal=0,
            message="the journal has no records",
        )
    return VerifyReport(ok=True, events=chain.count, head=chain.head)
