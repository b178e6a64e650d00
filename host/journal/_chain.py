"""The chain rules every reader applies, written once.

Both the fast verifier (plain dicts) and rehydration (models) feed each
record's identity through :class:`ChainCheck`, so the two can never disagree on
what a removed, reordered, inserted, duplicated or spliced event is.
"""

from __future__ import annotations

from contracts._errors import ErrorCode, error
from contracts._ids import Digest
from host.journal._codec import at


class ChainCheck:
    """Checks the records of one journal in stored order.

    For each event, in this order: same execution as the header
    (JOURNAL_FOREIGN_RECORD), ordinal equal to its position, where a lower
    ordinal whose digest was already seen is JOURNAL_DUPLICATE_EVENT and any
    other mismatch is JOURNAL_ORDINAL_GAP, and ``prior`` equal to the previous
    record's digest (JOURNAL_CHAIN_BROKEN).
    """

    __slots__ = ("_execution", "_head", "_seen", "count")

    def __init__(self, execution: str, header_digest: Digest) -> None:
        self._execution = execution
        self._head = header_digest
        # Digest -> ordinal of every accepted record, to tell a duplicate from a gap.
        self._seen: dict[str, int] = {header_digest: 0}
        self.count = 0
        """Events accepted so far."""

    @property
    def execution(self) -> str:
        """The execution every event must belong to."""
        return self._execution

    @property
    def seen(self) -> dict[str, int]:
        """Digest -> ordinal of every accepted record (a caller that checks inline adds to it)."""
        return self._seen

    def resume(self, head: Digest, count: int) -> None:
        """Continue after ``count`` events a caller accepted inline, the last with ``head``."""
        self._head = head
        self.count = count

    @property
    def head(self) -> Digest:
        """Digest of the last accepted record (the header's when there are no events)."""
        return self._head

    def event(self, execution: object, ordinal: object, prior: object, digest: Digest) -> None:
        """Accept the next event or raise the first rule it breaks."""
        position = self.count + 1
        if execution != self._execution:
            raise error(
                ErrorCode.JOURNAL_FOREIGN_RECORD,
                f"event belongs to execution {execution!r}",
                path=at(position),
                expected=self._execution,
            )
        if type(ordinal) is not int or ordinal != position:
            if digest in self._seen:
                raise error(
                    ErrorCode.JOURNAL_DUPLICATE_EVENT,
                    f"event repeats ordinal {self._seen[digest]}",
                    path=at(position),
                )
            raise error(
                ErrorCode.JOURNAL_ORDINAL_GAP,
                f"found ordinal {ordinal!r}",
                path=at(position),
                expected=str(position),
            )
        if prior != self._head:
            raise error(
                ErrorCode.JOURNAL_CHAIN_BROKEN,
                "prior digest does not name the previous record",
                path=at(position),
                expected=self._head,
            )
        self._seen[digest] = position
        self._head = digest
        self.count = position
