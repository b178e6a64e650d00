"""Full replay of an exported journal: strict decoding plus every append rule."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from contracts._delivery import AuthorityPolicy
from contracts._errors import ErrorCode, error
from contracts._journal import JournalEvent, JournalHeader
from host.journal._codec import at, decode_line
from host.journal._journal import Journal
from host.journal._state import SourceResolver


def replay_lines(
    lines: Iterable[bytes],
    policy: AuthorityPolicy,
    *,
    resolver: SourceResolver | None = None,
) -> Journal:
    """Decode and replay an export, raising the first refusal (``path="ordinal K"``).

    Slower than :func:`verify_lines` (pydantic per record, all rules re-run); use
    it to rebuild a journal or to audit its semantics, not just its integrity.
    """
    stream = iter(lines)
    first = next(stream, None)
    if first is None:
        raise error(ErrorCode.JOURNAL_EMPTY, "the journal has no records", path=at(0))
    header = decode_line(first, 0)
    if not isinstance(header, JournalHeader):
        raise error(ErrorCode.JOURNAL_MISSING_HEADER, "first record is not a header", path=at(0))
    return Journal.rehydrate(header, _events(stream), policy, resolver=resolver)


def replay_tail(journal: Journal, lines: Iterable[bytes]) -> None:
    """Extend ``journal`` by the stored lines that follow its last event, every rule re-run.

    ``lines`` are the records after the journal's last one (no header). On a
    refusal the journal is left part-extended; rebuild it with :func:`replay_lines`.
    """
    journal.extend(_events(iter(lines), start=len(journal) + 1))


def _events(stream: Iterator[bytes], start: int = 1) -> Iterator[JournalEvent]:
    for position, line in enumerate(stream, start=start):
        record = decode_line(line, position)
        if not isinstance(record, JournalEvent):
            raise error(
                ErrorCode.JOURNAL_MALFORMED_RECORD,
                "a header may only be the first record",
                path=at(position),
            )
        yield record
