"""Generate the recorded journal fixture pack under ``tests/fixtures/journal/``.

Run ``python -m tests.journal.make_fixtures`` from the repository root and
commit the output. Every file is deterministic; ``test_fixtures`` checks that
the committed bytes are exactly what this script produces, and that each
adversarial copy fails with the code written next to it here (``EXPECTED``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from contracts import NodeId
from contracts._journal import (
    Actor,
    ActorKind,
    Batch,
    JournalEvent,
    NodeState,
    SuccessorInfo,
    Transition,
)
from host.journal import Journal, encode_record, export_lines, record_digest

from .scenario import Driver, happy_journal, ref

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "journal"

#: file -> (verify outcome, replay outcome): "ok" or "<CODE>@<ordinal>".
EXPECTED: dict[str, tuple[str, str]] = {
    "valid-loop.jsonl": ("ok", "ok"),
    "valid-invalidation.jsonl": ("ok", "ok"),
    "flipped-byte.jsonl": ("JOURNAL_DIGEST_MISMATCH@5", "JOURNAL_DIGEST_MISMATCH@5"),
    "removed-event.jsonl": ("JOURNAL_ORDINAL_GAP@7", "JOURNAL_ORDINAL_GAP@7"),
    "reordered-events.jsonl": ("JOURNAL_ORDINAL_GAP@7", "JOURNAL_ORDINAL_GAP@7"),
    "inserted-event.jsonl": ("JOURNAL_ORDINAL_GAP@8", "JOURNAL_ORDINAL_GAP@8"),
    "duplicated-event.jsonl": ("JOURNAL_DUPLICATE_EVENT@8", "JOURNAL_DUPLICATE_EVENT@8"),
    "spliced-foreign-event.jsonl": ("JOURNAL_FOREIGN_RECORD@7", "JOURNAL_FOREIGN_RECORD@7"),
    "broken-chain.jsonl": ("JOURNAL_CHAIN_BROKEN@5", "JOURNAL_CHAIN_BROKEN@5"),
    "missing-header.jsonl": ("JOURNAL_MISSING_HEADER@0", "JOURNAL_MISSING_HEADER@0"),
    "noncanonical.jsonl": ("JOURNAL_NONCANONICAL@3", "JOURNAL_NONCANONICAL@3"),
    "unknown-field.jsonl": ("JOURNAL_UNKNOWN_FIELD@3", "JOURNAL_UNKNOWN_FIELD@3"),
    "empty.jsonl": ("JOURNAL_EMPTY@0", "JOURNAL_EMPTY@0"),
    # Re-chained forgeries: the integrity check passes, the replayed rules do not.
    "forged-role.jsonl": ("ok", "JOURNAL_FORGED_ROLE@14"),
    "automation-claims-human.jsonl": ("ok", "JOURNAL_AUTOMATION_CLAIMS_HUMAN@14"),
    "partial-invalidation.jsonl": ("ok", "JOURNAL_PARTIAL_INVALIDATION@33"),
    "bad-successor.jsonl": ("ok", "JOURNAL_BAD_SUCCESSOR@33"),
    "invalid-transition.jsonl": ("ok", "JOURNAL_INVALID_TRANSITION@1"),
}


def _rechain(journal: Journal, events: list[JournalEvent]) -> list[bytes]:
    """Export ``events`` after renumbering and re-linking them (a forger's rewrite)."""
    lines = [encode_record(journal.header) + b"\n"]
    prior = record_digest(journal.header)
    for ordinal, event in enumerate(events, start=1):
        fixed = event.model_copy(update={"ordinal": ordinal, "prior": prior})
        lines.append(encode_record(fixed) + b"\n")
        prior = record_digest(fixed)
    return lines


def _edit(journal: Journal, ordinal: int, **changes: object) -> list[bytes]:
    events = list(journal.events)
    events[ordinal - 1] = events[ordinal - 1].model_copy(update=changes)
    return _rechain(journal, events)


def _invalidated() -> Journal:
    d = Driver(happy_journal())
    d.invalidate(("build", 2))
    d.bind(("build", 2), ("review", 2), ("ship", 1))
    return d.journal


def build_all() -> dict[str, bytes]:
    """Every fixture file name and its bytes."""
    happy = happy_journal()
    lines = list(export_lines(happy))
    other = list(export_lines(happy_journal("d-other-execution")))
    invalidated = _invalidated()
    inv_lines = list(export_lines(invalidated))
    inserted = happy.events[6].model_copy(update={"rationale": "inserted"})
    files: dict[str, list[bytes] | Callable[[], list[bytes]]] = {
        "valid-loop.jsonl": lines,
        "valid-invalidation.jsonl": inv_lines,
        "flipped-byte.jsonl": [
            *lines[:5],
            lines[5].replace(b"req-000005", b"req-000095"),
            *lines[6:],
        ],
        "removed-event.jsonl": lines[:7] + lines[8:],
        "reordered-events.jsonl": [*lines[:7], lines[8], lines[7], *lines[9:]],
        "inserted-event.jsonl": [*lines[:7], encode_record(inserted) + b"\n", *lines[7:]],
        "duplicated-event.jsonl": [*lines[:8], lines[7], *lines[8:]],
        "spliced-foreign-event.jsonl": [*lines[:7], other[7], *lines[8:]],
        "broken-chain.jsonl": [
            *lines[:5],
            encode_record(happy.events[4].model_copy(update={"prior": happy.events[0].prior}))
            + b"\n",
            *lines[6:],
        ],
        "missing-header.jsonl": lines[1:],
        "noncanonical.jsonl": [*lines[:3], lines[3].replace(b'","', b'", "', 1), *lines[4:]],
        "unknown-field.jsonl": [*lines[:3], _extra_member(lines[3]), *lines[4:]],
        "empty.jsonl": [],
        # review#1 started by carol under a role the policy does not give her.
        "forged-role.jsonl": _edit(
            happy, 14, actor=Actor(id="carol", kind=ActorKind.HUMAN, role="maintainer")
        ),
        # review#1 started by automation.
        "automation-claims-human.jsonl": _edit(
            happy, 14, actor=Actor(id="runner-1", kind=ActorKind.AUTOMATION)
        ),
        # The invalidation batch (build#2, review#2, ship#1) cut to build#2 only.
        "partial-invalidation.jsonl": _partial(invalidated),
        # Successor bound to ship#1 while it is still completed.
        "bad-successor.jsonl": _rechain(happy, [*happy.events, _successor_event(happy.events[-1])]),
        # plan#1 recorded as completed straight from ready.
        "invalid-transition.jsonl": _edit(
            happy, 1, transition=Transition.WORK_COMPLETED, result_state=NodeState.COMPLETED
        ),
    }
    return {name: b"".join(value() if callable(value) else value) for name, value in files.items()}


def _extra_member(line: bytes) -> bytes:
    import hashlib

    from host.journal._codec import dumps_canonical

    fields = json.loads(line)
    del fields["digest"]
    fields["note"] = "smuggled"
    fields["digest"] = "sha256:" + hashlib.sha256(dumps_canonical(fields)).hexdigest()
    return dumps_canonical(fields) + b"\n"


def _partial(journal: Journal) -> list[bytes]:
    events = [e for e in journal.events if e.transition is Transition.WORK_INVALIDATED]
    first = events[0]
    kept = [e for e in journal.events if e.ordinal < first.ordinal]
    cut = first.model_copy(update={"batch": Batch(index=1, size=1)})
    return _rechain(journal, [*kept, cut])


def _successor_event(last: JournalEvent) -> JournalEvent:
    return last.model_copy(
        update={
            "request": "req-forged",
            "transition": Transition.SUCCESSOR_BOUND,
            "prior_state": NodeState.COMPLETED,
            "result_state": NodeState.SUPERSEDED,
            "attempt": None,
            "refs": (),
            "batch": Batch(index=1, size=1),
            "successor": SuccessorInfo(execution="d-next", header=ref("header", "next").digest),
            "node": NodeId("ship"),
        }
    )


def main() -> int:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for name, data in build_all().items():
        (FIXTURES / name).write_bytes(data)
    print(f"wrote {len(EXPECTED)} fixtures to {FIXTURES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
