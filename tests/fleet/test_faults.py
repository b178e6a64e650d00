"""Faults a runner fleet survives: a runner SIGKILLed mid-step, a runner frozen past its lease.

Every scenario runs real ``execsys serve`` processes on SQLite and on PostgreSQL,
counts the turns the executor really ran, and verifies every journal.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fleet import conftest
from tests.fleet.conftest import Fleet, stopped, wait_until

NODES = ("one", "slow", "three")


def _holder(fleet: Fleet, delivery: str) -> str | None:
    """The name of the live runner holding ``delivery``'s lease, if any."""
    listed = fleet.cli("runners", "--json")
    assert listed.returncode == 0, listed.stderr
    for row in json.loads(listed.stdout)["runners"]:
        if delivery in row["deliveries"]:
            return str(row["name"])
    return None


def _needing_directive(fleet: Fleet) -> list[str]:
    done = fleet.cli("status", "--json")
    assert done.returncode == 0, done.stderr
    return [entry["delivery"] for entry in json.loads(done.stdout)["needs_directive"]]


def _lease_state(fleet: Fleet, delivery: str) -> str:
    done = fleet.cli("inspect", delivery, "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["lease"]["state"])


def _verify_all(fleet: Fleet, deliveries: list[str]) -> None:
    for delivery in deliveries:
        verified = fleet.cli("journal", "verify", delivery)
        assert verified.returncode == 0, (delivery, verified.stderr)


def _continue_queued(fleet: Fleet, delivery: str, reason: str) -> None:
    queued = fleet.cli(
        "recover", delivery, "--directive", "continue", "--reason", reason, "--queue"
    )
    assert queued.returncode == 0, queued.stderr
    # The status is read after the directive commits; a runner woken by the queue's
    # notification may already have claimed the delivery by then.
    assert f"delivery {delivery}: queued" in queued.stdout or (
        f"delivery {delivery}: running" in queued.stdout and "claimed by" in queued.stdout
    ), queued.stdout


@pytest.mark.slow
def test_one_of_three_runners_killed_mid_step_its_delivery_waits_then_another_finishes(
    fleet: Fleet,
) -> None:
    deliveries = [fleet.submit(n) for n in range(3)]
    names = ("a", "b", "c")
    runners = {name: fleet.serve(name) for name in names}
    try:
        wait_until(
            lambda: all((d, "slow", "1", "1", "1") in fleet.turns() for d in deliveries),
            what="every delivery in its slow step",
        )
        victim = deliveries[1]
        holder = _holder(fleet, victim)
        assert holder in runners, holder
        runners[holder].send_signal(signal.SIGKILL)
        runners[holder].wait(timeout=60)
        fleet.release.touch()
        others = [d for d in deliveries if d != victim]
        wait_until(
            lambda: all(fleet.statuses()[d] == "completed" for d in others),
            what="the surviving runners' deliveries",
        )
        wait_until(lambda: _needing_directive(fleet) == [victim], what="a directive needed")
        assert fleet.statuses()[victim] == "running", "nobody takes it up on its own"
        _continue_queued(fleet, victim, "runner killed")
        wait_until(lambda: fleet.statuses()[victim] == "completed", what="the continued victim")
    finally:
        codes = {
            name: stopped(process) if process.poll() is None else None
            for name, process in runners.items()
        }
    survivors = [name for name in names if name != holder]
    assert [codes[name] for name in survivors] == [0, 0]
    for name in survivors:
        assert (fleet.root / f"{name}.err").read_text() == "", name
    turns = fleet.turns()
    assert set(turns.values()) == {1}, "no turn ran twice"
    expected = {(d, n, "1", "1", "1") for d in deliveries for n in NODES}
    expected.add((victim, "slow", "1", "2", "1"))  # the killed attempt, retried once
    assert set(turns) == expected
    _verify_all(fleet, deliveries)


@pytest.mark.slow
def test_a_runner_frozen_past_its_lease_is_fenced_when_it_wakes(fleet: Fleet) -> None:
    delivery = fleet.submit(1)
    frozen = fleet.serve("a", "--lease-ttl", "2")
    taker: subprocess.Popen[str] | None = None
    try:
        wait_until(lambda: (delivery, "slow", "1", "1", "1") in fleet.turns(), what="slow step")
        frozen.send_signal(signal.SIGSTOP)
        wait_until(lambda: _lease_state(fleet, delivery) == "expired", what="the lease expiry")
        assert _needing_directive(fleet) == [delivery]
        _continue_queued(fleet, delivery, "runner frozen")
        taker = fleet.serve("b")
        fleet.release.touch()  # the frozen runner's executor finishes too; nobody reads it yet
        wait_until(lambda: fleet.statuses()[delivery] == "completed", what="the taken delivery")
        journal = fleet.cli("journal", "export", delivery)
        assert journal.returncode == 0, journal.stderr
        frozen.send_signal(signal.SIGCONT)
        wait_until(
            lambda: "LEASE_FENCED" in (fleet.root / "a.err").read_text(),
            what="the woken runner's late write fenced",
        )
        assert frozen.poll() is None, "a fenced runner goes on serving"
        assert fleet.cli("journal", "export", delivery).stdout == journal.stdout
    finally:
        if frozen.poll() is None:
            frozen.send_signal(signal.SIGCONT)
        codes = [stopped(frozen)] + ([stopped(taker)] if taker is not None else [])
    assert codes == [0, 0], [(fleet.root / f"{n}.err").read_text() for n in "ab"]
    assert fleet.statuses() == {delivery: "completed"}
    turns = fleet.turns()
    assert set(turns.values()) == {1}, "no turn ran twice"
    assert set(turns) == {
        (delivery, "one", "1", "1", "1"),
        (delivery, "slow", "1", "1", "1"),
        (delivery, "slow", "1", "2", "1"),
        (delivery, "three", "1", "1", "1"),
    }
    _verify_all(fleet, [delivery])
    assert (fleet.root / "b.err").read_text() == ""


@pytest.mark.slow
def test_a_runners_connection_killed_mid_commit_loses_that_step_and_the_runner_goes_on(
    fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not fleet.store.startswith("postgresql://"):
        pytest.skip("pg_terminate_backend needs PostgreSQL")
    source = Path(__file__).resolve().parents[1] / "postgres" / "agents" / "terminating_execsys.py"
    wrapper = tmp_path / "execsys"
    wrapper.write_text(f"#!{sys.executable}\n" + source.read_text())
    wrapper.chmod(0o755)
    monkeypatch.setattr(conftest, "EXECSYS", str(wrapper))
    fleet.release.touch()
    fleet.extra_env["EXECSYS_TEST_TERMINATE_AT"] = "3"  # the second node's commit
    runner = fleet.serve("a")
    try:
        delivery = fleet.submit(1)
        wait_until(
            lambda: "STORE_" in (fleet.root / "a.err").read_text(), what="the lost commit reported"
        )
        wait_until(lambda: _needing_directive(fleet) == [delivery], what="a directive asked for")
        assert runner.poll() is None, "the runner goes on serving"
        _continue_queued(fleet, delivery, "connection lost")
        wait_until(lambda: fleet.statuses()[delivery] == "completed", what="the continued delivery")
    finally:
        code = stopped(runner)
    lines = (fleet.root / "a.err").read_text().strip().splitlines()
    assert code == 0 and len(lines) == 1 and lines[0].startswith("execsys: STORE_"), lines
    turns = fleet.turns()
    # The third commit (node one's result) was lost: one runs again as attempt 2 after the
    # directive; nothing that committed ran twice.
    assert set(turns.values()) == {1}, turns
    assert {(node, attempt) for _, node, _, attempt, _ in turns} == {
        ("one", "1"),
        ("one", "2"),
        ("slow", "1"),
        ("three", "1"),
    }
    _verify_all(fleet, [delivery])
