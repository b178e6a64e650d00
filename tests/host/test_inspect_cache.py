"""``inspect`` keeps replayed journals: what it reports never differs from a full replay.

A long-lived process (the console, a runner) inspects the same deliveries
again and again; it replays only what the journal gained since its last look.
These tests compare every cached answer with an uncached one on the same store,
and check that lines appended behind its back are still held to every rule.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contracts import CorrelationId
from contracts._errors import ExecsysError
from contracts._journal import JournalEvent
from host._views import ReplayCache, inspect_report
from host.journal import decode_line
from host.journal._codec import encode_record_with_digest
from tests.host.harness import ask_once, asking_graph, make_delivery


def _uncached(h: Any, did: str) -> Any:
    return inspect_report(h.host.store, did)


def test_a_cached_inspect_follows_the_journal_as_it_grows(harness: Any) -> None:
    h = harness({"ask": ask_once})
    delivery = make_delivery(asking_graph())
    did = delivery.delivery_id
    suspended = h.run(delivery)
    first = h.inspect(delivery)
    assert first.journal == _uncached(h, did).journal
    assert h.inspect(delivery) == first  # unchanged journal: same answer
    correlation = CorrelationId(suspended.suspension.correlation)
    done = asyncio.run(h.host.answer(did, correlation, {"go": True}))
    assert done.status.value == "completed"
    later = h.inspect(delivery)
    fresh = _uncached(h, did)
    assert later.journal.events > first.journal.events
    assert later.journal == fresh.journal
    assert later.nodes == fresh.nodes
    assert later.interrupted == fresh.interrupted


def test_a_line_appended_behind_the_cache_is_checked_like_a_full_replay(harness: Any) -> None:
    h = harness({"ask": ask_once})
    delivery = make_delivery(asking_graph())
    did = delivery.delivery_id
    h.run(delivery)
    h.inspect(delivery)  # cached now
    lines = h.host.store.journal_lines(did)
    last = decode_line(lines[-1], len(lines) - 1)
    assert isinstance(last, JournalEvent)
    # The next ordinal, but naming the wrong prior record: the chain is broken.
    forged = last.model_copy(update={"ordinal": last.ordinal + 1})
    digest, line = encode_record_with_digest(forged)
    with h.host.store.transaction() as tx:
        tx.append_journal(did, [(forged.ordinal, digest, line)])
    with pytest.raises(ExecsysError) as full:
        _uncached(h, did)
    with pytest.raises(ExecsysError) as cached:
        h.inspect(delivery)
    assert cached.value.code == full.value.code
    assert str(cached.value) == str(full.value)


def test_the_cache_keeps_only_the_most_recent_deliveries(harness: Any) -> None:
    h = harness({"ask": ask_once})
    cache = ReplayCache()
    cache.SIZE = 2
    made = [make_delivery(asking_graph(), nonce=str(n)) for n in range(4)]
    for delivery in made:
        h.run(delivery)
        inspect_report(h.host.store, delivery.delivery_id, cache)
    assert list(cache._entries) == [d.delivery_id for d in made[-2:]]
