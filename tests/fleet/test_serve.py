"""``execsys serve``: runner processes drain queued deliveries, each step exactly once."""

from __future__ import annotations

import json
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from tests.fleet.conftest import HERE, Fleet, stopped, wait_until

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


LONG_SPEC = """\
spec: execution-system/v1
graph: fleet-long-turn
input:
  type: object
  properties: {n: {type: integer}}
  required: [n]
start: long
nodes:
  long: {kind: action, executor: long, workspace: write, outputs: {v: {type: integer}}, next: after}
  after: {kind: action, executor: long, outputs: {v: {type: integer}}, next: done}
  done: {kind: terminal, outcome: succeeded}
"""


@pytest.mark.parametrize("how", ["grace", "second-signal"])
def test_a_turn_still_running_when_the_drain_ends_is_ended_restored_and_handed_back(
    fleet: Fleet, how: str
) -> None:
    long = HERE / "agents" / "long.py"
    (fleet.root / "execsys.yaml").write_text(
        f"executors:\n  long: {{command: [{sys.executable}, {long}]}}\n"
    )
    (fleet.root / "spec.yaml").write_text(LONG_SPEC)
    delivery = fleet.submit(1)
    # 'grace': one second, then the turn ends; 'second-signal': the default grace
    # (20 s, longer than the wait below allows) cut short by a second SIGTERM.
    runner = fleet.serve("a", *(["--drain-grace", "1"] if how == "grace" else []))
    try:
        wait_until(lambda: bool(_long_turns(fleet)), what="the long turn")
        [(_, _, _, seen, pid)] = _long_turns(fleet)
        assert seen == "clean"
        runner.send_signal(signal.SIGTERM)
        if how == "second-signal":
            time.sleep(0.5)
            runner.send_signal(signal.SIGTERM)
        code = runner.wait(timeout=15)
    finally:
        if runner.poll() is None:
            runner.kill()
    err = (fleet.root / "a.err").read_text()
    assert code == 0, err
    assert "ending the turns of 1 delivery in flight" in err
    assert ("drain grace ran out" in err) == (how == "grace")
    assert not _alive(int(pid)), "the ended turn's executor is gone"
    assert fleet.statuses() == {delivery: "queued"}
    inspected = json.loads(fleet.cli("inspect", delivery, "--json").stdout)
    assert inspected["lease"]["state"] == "released"
    exported = fleet.cli("journal", "export", delivery).stdout.splitlines()
    [blocked] = [json.loads(line) for line in exported if "handed back" in line]
    assert (blocked["node"], blocked["transition"]) == ("long", "work-blocked")
    assert blocked["error"]["message"].startswith("handed back during 'long'")

    # The next runner runs the same turn again, on the workspace restored to its base.
    fleet.release.touch()
    other = fleet.serve("b")
    try:
        wait_until(lambda: fleet.statuses() == {delivery: "completed"}, what="completed on b")
    finally:
        assert stopped(other) == 0, (fleet.root / "b.err").read_text()
    turns = [line.split()[:4] for line in fleet.log.read_text().splitlines()]
    assert turns == [
        ["long", "1", "1", "clean"],
        ["long", "1", "1", "clean"],
        ["after", "1", "1", "dirty"],  # the second, finished turn's file was committed
    ]
    verified = fleet.cli("journal", "verify", delivery)
    assert verified.returncode == 0, verified.stderr


def test_serve_refuses_a_bad_drain_grace(fleet: Fleet) -> None:
    done = fleet.cli("serve", "--drain-grace", "-1")
    assert done.returncode == 2
    assert done.stderr == (
        "execsys: USAGE at --drain-grace: --drain-grace '-1' (expected seconds 0..86400)\n"
    )


def _long_turns(fleet: Fleet) -> list[list[str]]:
    if not fleet.log.exists():
        return []
    return [line.split() for line in fleet.log.read_text().splitlines() if line.startswith("long")]


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper has ended)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.1)
    return True
