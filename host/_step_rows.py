"""The Host's rows of one step, written in the transaction of the step's checkpoint.

A checkpointer of any backend calls :func:`write_step_rows` inside the
transaction that stores the checkpoint: the records the step produced, its
journal events (chained onto the stored head and checked against the
journal's rules), the delivery's derived status and the checkpoint index.
Either all of it is durable with the checkpoint or none of it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, assert_never

from contracts import canonical_bytes
from host._journal_book import JournalBook
from host._outbox import EventItem, InvalidateItem, OutboxItem
from host.storage import StorageTx

StatusDeriver = Callable[[dict[str, Any], bool], tuple[str, str | None, dict[str, Any]]]


def needs_flush(source: object, outbox: list[OutboxItem] | None, more: bool) -> bool:
    """Whether a root checkpoint's commit must wait for the durability flush (decision 0154).

    Every checkpoint does, except one that only routes: a step of the run's own
    loop (not the input that starts a run) in which no node recorded anything
    (no record, no journal event) and after which work is still scheduled. It
    is the starting step that hands a run's input to the nodes it wakes, or a
    node woken with nothing to do. Nothing outside the store saw it happen, and
    it follows from the checkpoint before it alone; so a power cut that undoes
    it costs only its replay from that checkpoint, and the next step's commit,
    which does flush, makes it durable before any executor's result is kept.
    """
    return source != "loop" or bool(outbox) or not more


def write_step_rows(
    tx: StorageTx,
    journals: JournalBook,
    derive_status: StatusDeriver,
    delivery: str,
    checkpoint: str,
    values: dict[str, Any],
    outbox: list[OutboxItem] | None,
    more: bool,
) -> None:
    """Write what rides with a root checkpoint: records, journal events, status, index.

    ``values`` are the checkpoint's channel values, ``outbox`` the step's outbox
    items (None when the step wrote none) and ``more`` whether work is still
    scheduled after it.
    """
    drafts: list[EventItem | InvalidateItem] = []
    records: list[tuple[str, bytes]] = []
    for item in outbox or ():
        if item["type"] == "record":
            records.append((item["digest"], canonical_bytes(item["value"])))
        elif item["type"] == "event" or item["type"] == "invalidate":
            drafts.append(item)
        else:
            assert_never(item["type"])
    if records:
        tx.put_records(delivery, records)
    journal = journals.append(tx, delivery, drafts) if drafts else journals.journal(delivery, tx)
    status, outcome, detail = derive_status(values, more)
    # What this checkpoint embodies, recorded with it: the journal head it
    # was committed with and the custody savepoint it expects.
    detail["journal"] = {"head": journal.head, "events": len(journal)}
    tx.set_status(delivery, status, outcome, detail, checkpoint)
    tx.index_checkpoint(delivery, checkpoint, detail.get("savepoint"), len(journal))
