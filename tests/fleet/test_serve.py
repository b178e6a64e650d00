"""``execsys serve``: runner processes drain queued deliveries, each step exactly once."""

from __future__ import annotations

import json
import signal
import socket

import pytest

from tests.fleet.conftest import Fleet, stopped, wait_until

NODES = ("one", "slow", "three")


@pytest.mark.slow
def test_two_runners_drain_the_queue_running_every_turn_once(fleet: Fleet) -> None:
    fleet.release.touch()  # no step waits
    deliveries = [fleet.submit(n) for n in range(8)]
    runners = [fleet.serve("a", "--concurrency", "2"), fleet.serve("b", "--concurrency", "2")]
    try:
        wait_until(
            lambda: set(fleet.statuses().values()) == {"completed"}, what="all deliveries done"
        )
    finally:
        codes = [stopped(r) for r in runners]
    assert codes == [0, 0], [(fleet.root / f"{n}.err").read_text() for n in "ab"]
    turns = fleet.turns()
    assert set(turns.values()) == {1}
    assert set(turns) == {(d, n, "1", "1", "1") for d in deliveries for n in NODES}
    for delivery in deliveries:
        verified = fleet.cli("journal", "verify", delivery)
        assert verified.returncode == 0, verified.stderr
    driven = [
        line
        for name in "ab"
        for line in (fleet.root / f"{name}.out").read_text().splitlines()
        if line.endswith(": completed")
    ]
    assert len(driven) == len(deliveries)


def test_sigterm_lets_the_step_in_flight_finish_and_hands_the_delivery_back(fleet: Fleet) -> None:
    delivery = fleet.submit(1)
    runner = fleet.serve("a")
    try:
        wait_until(lambda: (delivery, "slow", "1", "1", "1") in fleet.turns(), what="slow step")
        listed = fleet.cli("runners", "--json")
        assert listed.returncode == 0, listed.stderr
        [row] = json.loads(listed.stdout)["runners"]
        assert (row["name"], row["pid"], row["deliveries"]) == ("a", runner.pid, [delivery])
        assert row["host"] == socket.gethostname()
        runner.send_signal(signal.SIGTERM)
        fleet.release.touch()
        code = runner.wait(timeout=120)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert code == 0, (fleet.root / "a.err").read_text()
    # The step in flight finished and committed; the next one did not start here.
    assert set(fleet.turns()) == {(delivery, n, "1", "1", "1") for n in ("one", "slow")}
    assert fleet.statuses() == {delivery: "queued"}
    inspected = json.loads(fleet.cli("inspect", delivery, "--json").stdout)
    assert inspected["lease"]["state"] == "released"
    assert json.loads(fleet.cli("runners", "--json").stdout) == {"runners": []}
    assert fleet.cli("runners").stdout == "no live runners\n"

    # The next runner continues it: every turn ran once, the journal verifies.
    other = fleet.serve("b")
    try:
        wait_until(lambda: fleet.statuses() == {delivery: "completed"}, what="completed on b")
    finally:
        assert stopped(other) == 0, (fleet.root / "b.err").read_text()
    turns = fleet.turns()
    assert set(turns.values()) == {1}
    assert set(turns) == {(delivery, n, "1", "1", "1") for n in NODES}
    verified = fleet.cli("journal", "verify", delivery)
    assert verified.returncode == 0, verified.stderr
    exported = fleet.cli("journal", "export", delivery).stdout.splitlines()
    blocked = [json.loads(line) for line in exported if "handed back" in line]
    assert {e["node"] for e in blocked} == {"three"}, "the journal says what was handed back"
    assert "work-blocked" in [e["transition"] for e in blocked]


def test_a_runner_started_on_an_idle_store_exits_0_on_sigint(fleet: Fleet) -> None:
    runner = fleet.serve("a")
    wait_until(lambda: fleet.cli("status").returncode == 0, what="a readable store")
    runner.send_signal(signal.SIGINT)
    assert runner.wait(timeout=60) == 0, (fleet.root / "a.err").read_text()


def test_serve_refuses_a_bad_concurrency(fleet: Fleet) -> None:
    done = fleet.cli("serve", "--concurrency", "0")
    assert done.returncode == 2
    assert done.stderr.startswith("execsys: USAGE at --concurrency: ")
