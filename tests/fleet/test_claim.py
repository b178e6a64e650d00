"""A claim takes a queued delivery once: a second claim, later or by another Host, gets nothing."""

from __future__ import annotations

import asyncio
import os

from tests.fleet.conftest import Fleet


def test_a_delivery_is_claimed_once_and_only_while_queued(fleet: Fleet) -> None:
    from execution_system._compose import open_runner

    fleet.release.touch()
    delivery = fleet.submit(1)
    back = os.getcwd()
    os.environ["EXECSYS_TEST_LOG"] = str(fleet.log)
    os.chdir(fleet.root)
    try:
        first, second = open_runner(fleet.store, fleet.root), open_runner(fleet.store, fleet.root)
        try:
            assert first.host.queued_deliveries(10) == [delivery]
            report = asyncio.run(first.host.drive_queued(delivery))
            assert report is not None and report.status.value == "completed"
            assert first.host.queued_deliveries(10) == []
            assert asyncio.run(second.host.drive_queued(delivery)) is None
            assert asyncio.run(first.host.drive_queued(delivery)) is None
        finally:
            first.close()
            second.close()
    finally:
        os.chdir(back)
        del os.environ["EXECSYS_TEST_LOG"]
    assert set(fleet.turns().values()) == {1} and len(fleet.turns()) == 3
