"""A runner on PostgreSQL wakes when a delivery is queued, without waiting for its next poll.

Every runner here polls once an hour (``--poll-interval 3600``), so a delivery is
only claimed within the test's deadline if the queuing transaction's NOTIFY
woke the runner: a submission, then a queued directive.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.conftest import Fleet, stopped, wait_until

HOUR = "3600"


@pytest.fixture
def pg_fleet(tmp_path: Path) -> Iterator[Fleet]:
    from tests.postgres.conftest import SERVER, create_database, drop_database

    if not SERVER:
        pytest.skip("EXECSYS_TEST_POSTGRES is not set")
    url = create_database()
    try:
        yield Fleet(tmp_path / "root", url)
    finally:
        drop_database(url)


def _listed(fleet: Fleet, name: str) -> bool:
    done = fleet.cli("runners", "--json")
    return done.returncode == 0 and name in {r["name"] for r in json.loads(done.stdout)["runners"]}


def test_a_submission_and_a_queued_directive_wake_a_runner_at_once(pg_fleet: Fleet) -> None:
    fleet = pg_fleet
    first = fleet.submit(1)  # creates the schema; the runner claims it on its first look
    runner = fleet.serve("a", "--poll-interval", HOUR, "--lease-ttl", "3")
    try:
        wait_until(lambda: _listed(fleet, "a"), what="the runner listening")
        wait_until(lambda: (first, "slow", "1", "1", "1") in fleet.turns(), what="first claim")
        # Killed mid-step, the delivery needs a directive; a new runner is woken by the queuing.
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=60)
        runner = fleet.serve("b", "--poll-interval", HOUR)
        wait_until(lambda: _listed(fleet, "b"), what="the second runner listening")
        fleet.release.touch()
        second = fleet.submit(2)
        wait_until(lambda: fleet.statuses()[second] == "completed", what="a woken claim")
        queued = fleet.cli("recover", first, "--directive", "continue", "--reason", "x", "--queue")
        assert queued.returncode == 0, queued.stderr
        wait_until(lambda: fleet.statuses()[first] == "completed", what="a woken directive")
    finally:
        code = stopped(runner)
    assert code == 0, (fleet.root / "b.err").read_text()
    assert set(fleet.turns().values()) == {1}


def test_on_sqlite_a_runner_polls(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path / "root", f"sqlite:///{tmp_path / 'state.db'}")
    fleet.release.touch()
    runner = fleet.serve("a", "--poll-interval", "0.05")
    try:
        wait_until(lambda: _listed(fleet, "a"), what="the runner started")
        delivery = fleet.submit(1)
        wait_until(lambda: fleet.statuses()[delivery] == "completed", what="a polled claim")
    finally:
        code = stopped(runner)
    assert code == 0, (fleet.root / "a.err").read_text()


def test_serve_refuses_a_bad_poll_interval(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path / "root", f"sqlite:///{tmp_path / 'state.db'}")
    for bad in ("0", "nan", "soon", "-1"):
        done = fleet.cli("serve", "--poll-interval", bad)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("execsys: USAGE at --poll-interval: "), done.stderr
