"""The needs-a-directive listing: which deliveries it compares heads for, and which not.

A delivery at rest (suspended or waiting) committed its status, checkpoint,
journal and custody savepoint together, so the listing does not read custody
for it; a running one (its runner may have died mid-step) is compared.
"""

from __future__ import annotations

from typing import Any

from contracts import DeliveryId, SavepointId
from tests.host.harness import ask_once, asking_graph, make_delivery
from tests.support.memory_custody import MemoryCustody


class CountingCustody(MemoryCustody):
    """Counts independent head reads."""

    def __init__(self) -> None:
        super().__init__()
        self.head_reads = 0

    def head(self, delivery: DeliveryId) -> SavepointId:
        self.head_reads += 1
        return super().head(delivery)


def test_resting_deliveries_are_listed_without_reading_custody(harness: Any) -> None:
    custody = CountingCustody()
    h = harness({"ask": ask_once}, custody=custody)
    for nonce in ("a", "b", "c"):
        assert h.run(make_delivery(asking_graph(), nonce=nonce)).status.value == "suspended"
    custody.head_reads = 0
    assert h.host.needs_directive() == []
    assert custody.head_reads == 0


def test_a_running_delivery_whose_custody_moved_on_is_listed(harness: Any) -> None:
    custody = CountingCustody()
    h = harness({"ask": ask_once}, custody=custody)
    delivery = make_delivery(asking_graph())
    h.run(delivery)
    # What a runner killed between custody's advance and the checkpoint leaves.
    did = delivery.delivery_id
    row = h.host.store.delivery(did)
    assert row is not None
    with h.host.store.transaction() as tx:
        tx.set_status(did, "running", None, row["detail"], None)
    custody.heads[did] = SavepointId("sha256:" + "f" * 64)
    custody.head_reads = 0
    (listed,) = h.host.needs_directive()
    assert listed.delivery == did
    assert any("custody head" in reason for reason in listed.reasons)
    assert custody.head_reads == 1


def test_an_orphaned_delivery_is_inspected_with_its_directive_need(harness: Any) -> None:
    h = harness({"ask": ask_once})
    delivery = make_delivery(asking_graph())
    h.run(delivery)
    did = delivery.delivery_id
    row = h.host.store.delivery(did)
    assert row is not None
    with h.host.store.transaction() as tx:
        tx.set_status(did, "running", None, row["detail"], None)
    view = h.host.inspect(did).to_json()
    assert list(view) == [
        "delivery",
        "status",
        "outcome",
        "suspension",
        "wait",
        "message",
        "graph",
        "updated",
        "suspensions",
        "waits",
        "nodes",
        "journal",
        "custody",
        "checkpoint",
        "directives",
        "interrupted",
        "lease",
        "needs_directive",
        "savepoints",
        "mismatches",
    ]
    assert (
        view["needs_directive"] == "its runner is gone (crashed or killed) in the middle of a step"
    )
    assert view["directives"] == ["recover continue", "recover restart-from-savepoint", "stop"]
