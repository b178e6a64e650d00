"""Custody's validation stays on the event loop's thread only for a lone, quick delivery.

Decision 0139: the hop to a worker thread costs more than it overlaps when the
process drives one delivery and its validations take little time; with a
second delivery in flight, or after a slow validation (a large workspace), the
validation goes to a worker thread so the loop keeps serving the others.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts import CustodyPreview, CustodyVerdict
from tests.host.harness import Harness, graph_doc, make_delivery, reply
from tests.support.memory_custody import MemoryCustody


@dataclass
class NotingCustody(MemoryCustody):
    """Notes, for each validation, whether it ran on the loop's thread; optionally slow."""

    on_loop: list[bool] = field(default_factory=list)
    slow_s: float = 0.0

    def validate(self, preview: CustodyPreview) -> CustodyVerdict:
        self.on_loop.append(threading.current_thread() is threading.main_thread())
        time.sleep(self.slow_s)
        return super().validate(preview)


def _chain(length: int) -> dict[str, Any]:
    nodes: dict[str, Any] = {
        f"s{i}": {"kind": "action", "executor": "e", "outputs": {}, "next": f"s{i + 1}"}
        for i in range(length)
    }
    nodes[f"s{length}"] = {"kind": "terminal", "outcome": "succeeded"}
    return graph_doc(nodes, "s0")


async def _done(_request: Any) -> dict[str, Any]:
    return reply({})


def _three_steps(tmp_path: Path, custody: NotingCustody) -> list[bool]:
    """Run a three-action chain alone; where each validation ran."""
    harness = Harness(tmp_path, {"e": _done}, custody=custody)
    try:
        assert harness.run(make_delivery(_chain(3))).status == "completed"
    finally:
        harness.close()
    return custody.on_loop


def test_a_lone_quick_delivery_validates_on_the_loop(tmp_path: Path) -> None:
    assert _three_steps(tmp_path, NotingCustody()) == [True, True, True]


def test_a_slow_validation_sends_the_next_ones_to_a_thread(tmp_path: Path) -> None:
    assert _three_steps(tmp_path, NotingCustody(slow_s=0.05)) == [True, False, False]


def test_two_deliveries_in_flight_validate_in_threads(tmp_path: Path) -> None:
    custody = NotingCustody()
    both = threading.Barrier(2)

    async def meet(_request: Any) -> dict[str, Any]:
        # Both deliveries' first turns wait for each other: both are active when
        # the first validation comes.
        await asyncio.to_thread(both.wait, 30)
        return reply({})

    harness = Harness(tmp_path, {"e": meet}, custody=custody)

    async def run_both() -> list[Any]:
        first, second = make_delivery(_chain(1), nonce="a"), make_delivery(_chain(1), nonce="b")
        return list(await asyncio.gather(harness.host.run(first), harness.host.run(second)))

    try:
        reports = asyncio.run(run_both())
    finally:
        harness.close()
    assert [r.status for r in reports] == ["completed", "completed"]
    assert custody.on_loop[0] is False, "with another delivery in flight it leaves the loop"
