"""Step counts, step latencies and executor failures, derived from delivery journals.

Every figure comes from the Host's public API: the listing says which deliveries
changed since the last look (``delivery_page(changed_since=...)``), and only
their journals are read again, from the first event not yet counted. A journal
is append-only (retirement keeps it), so what was counted stays counted, and a
new process, which counts every journal once on its first scrape, arrives at
the same totals.

A *step* is one committed stretch of a node's work: from ``work-started`` (or
the ``block-cleared`` that resumed it) to the next ``work-completed``,
``work-failed`` or ``work-blocked`` of the same activation. Its latency is the
difference of the two events' journal times, so time spent waiting for an
answer or an approval is never part of it. An *executor failure* is a
``work-failed`` or error-carrying ``work-blocked`` event at an action node,
counted by its error code.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from contracts import DeliveryId, ExecsysError
from host import CoordinatorHost

STEP_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
)
"""Upper bounds (seconds) of the step latency histogram; ``+Inf`` follows."""

OVERLAP_S = 2.0
"""Look this far behind the newest change seen (a commit stamped before an earlier read
but visible only after it is not missed)."""

_STARTS = frozenset({"work-started", "block-cleared"})
_ENDS = {"work-completed": "completed", "work-failed": "failed", "work-blocked": "blocked"}


@dataclass
class _Journal:
    """How far one delivery's journal has been counted."""

    lines: int = 1
    """Lines consumed, the header included."""
    changed: Any = None
    """The listing's last change of the delivery when it was read."""
    started: dict[tuple[str, int], datetime] = field(default_factory=dict)
    """Open steps: (node, activation) -> when the stretch of work began."""
    actions: frozenset[str] | None = None
    """The delivery's action nodes (None: not known yet)."""


@dataclass
class TallySnapshot:
    """The totals at one instant."""

    steps: dict[str, int]
    """Committed steps by result (completed, failed, blocked)."""
    buckets: list[int]
    """Steps per latency bucket (not cumulative), one per ``STEP_BUCKETS`` bound and +Inf."""
    latency_sum: float
    """Seconds, summed over every step."""
    failures: dict[str, int]
    """Executor failures by error code."""


class JournalTally:
    """Totals over every journal the store holds, kept up to date incrementally."""

    def __init__(self, host: CoordinatorHost) -> None:
        self._host = host
        self._journals: dict[str, _Journal] = {}
        self._mark: float | None = None
        self._actions_by_graph: dict[str, frozenset[str]] = {}
        self._lock = threading.Lock()
        self._steps: Counter[str] = Counter()
        self._buckets = [0] * (len(STEP_BUCKETS) + 1)
        self._sum = 0.0
        self._failures: Counter[str] = Counter()

    def refresh(self) -> TallySnapshot:
        """Count what was committed since the last refresh; return the totals."""
        with self._lock:
            since = None if self._mark is None else self._mark - OVERLAP_S
            rows = self._host.delivery_page(limit=10**9, changed_since=since).deliveries
            for row in rows:
                changed = row.changed
                self._mark = max(changed, self._mark or 0.0)
                seen = self._journals.setdefault(row.delivery, _Journal())
                if seen.changed is not None and seen.changed == changed:
                    continue
                if self._read(row.delivery, seen):
                    seen.changed = changed
            return TallySnapshot(
                steps=dict(self._steps),
                buckets=list(self._buckets),
                latency_sum=self._sum,
                failures=dict(self._failures),
            )

    def _read(self, delivery: DeliveryId, seen: _Journal) -> bool:
        try:
            lines = self._host.journal_lines(delivery)
        except ExecsysError:
            return False  # gone meanwhile (retired): what was counted stays
        if len(lines) <= seen.lines:
            return True
        if seen.actions is None:
            seen.actions = self._actions(delivery, lines[0])
        for line in lines[seen.lines :]:
            self._count(json.loads(line), seen)
        seen.lines = len(lines)
        return True

    def _actions(self, delivery: DeliveryId, header: bytes) -> frozenset[str]:
        """The action nodes of the delivery's graph (once per graph digest)."""
        digest = str(json.loads(header).get("graph", ""))
        found = self._actions_by_graph.get(digest)
        if found is None:
            try:  # the stored document: a retired delivery keeps it
                nodes = self._host.delivery_document(delivery)["graph"]["nodes"]
            except ExecsysError:
                return frozenset()
            found = frozenset(n for n, node in nodes.items() if node.get("kind") == "action")
            self._actions_by_graph[digest] = found
        return found

    def _count(self, event: dict[str, Any], seen: _Journal) -> None:
        transition = event.get("transition")
        key = (str(event.get("node")), int(event.get("activation") or 0))
        if transition in _STARTS:
            seen.started[key] = _when(event)
            return
        result = _ENDS.get(str(transition))
        if result is None:
            return
        began = seen.started.pop(key, None)
        if began is None:
            return  # an end without a start (a directive's failure): not a step
        error = event.get("error") or {}
        if error and key[0] in (seen.actions or ()):
            self._failures[str(error.get("code"))] += 1
        self._steps[result] += 1
        seconds = max(0.0, (_when(event) - began).total_seconds())
        self._sum += seconds
        self._buckets[_bucket(seconds)] += 1


def _when(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(event.get("time")))


def _bucket(seconds: float) -> int:
    for i, bound in enumerate(STEP_BUCKETS):
        if seconds <= bound:
            return i
    return len(STEP_BUCKETS)
