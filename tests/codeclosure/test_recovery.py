"""Goal-level recovery: a killed ``goal start``, a cancel during a check, honest exit codes.

The check here records its pid and then waits (until a release file exists),
so the runner can be killed, or the goal cancelled, while it runs. Every
process gets its own ``TMPDIR`` so the scratch copies it leaves are its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.codeclosure.helpers import CALC, EXECSYS, SOURCE

SLOW_CHECK = (
    "import os, pathlib, sys, time\n"
    "marks = pathlib.Path(sys.argv[1])\n"
    "(marks / f'check-{os.getpid()}').write_text('')\n"
    "while not (marks / 'release').exists():\n"
    "    time.sleep(0.05)\n"
    "sys.path.insert(0, 'src')\n"
    "from calc import add\n"
    "sys.exit(0 if add(2, 3) == 5 else 1)\n"
)
FIX = (
    f"--- a/{CALC}\n+++ b/{CALC}\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
    "-    return a - b\n+    return a + b\n"
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes: its parent has not reaped it yet.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


def _wait_for(predicate: Any, what: str, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.05)


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.project = tmp_path / "project"
        (self.project / "src").mkdir(parents=True)
        (self.project / "tests").mkdir()
        (self.project / CALC).write_text(SOURCE)
        (self.project / "tests" / "slow_check.py").write_text(SLOW_CHECK)
        self.marks = tmp_path / "marks"
        self.marks.mkdir()
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir()
        self.patch = tmp_path / "fix.patch"
        self.patch.write_text(FIX)
        self.store = f"sqlite:///{tmp_path}/state.db"
        self.env = {**os.environ, "TMPDIR": str(self.tmp), "NO_COLOR": "1"}

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [EXECSYS, *args, "--store", self.store],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=300,
            check=False,
        )

    def create(self) -> str:
        done = self.cli(
            "goal",
            "create",
            "--objective",
            "add() adds",
            "--project",
            str(self.project),
            "--criterion",
            "the check passes",
            "--check",
            f"tests={sys.executable} tests/slow_check.py {self.marks}",
            "--patch",
            str(self.patch),
            "--json",
        )
        assert done.returncode == 0, done.stderr
        return str(json.loads(done.stdout)["goal"])

    def start_in_background(self, goal: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [EXECSYS, "goal", "start", goal, "--expected-version", "1", "--store", self.store],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=self.env,
            text=True,
        )

    def start_and_kill(self, goal: str) -> int:
        """Start the goal, SIGKILL its runner while the check runs; wait for the check to die."""
        runner = self.start_in_background(goal)
        _wait_for(self.check_pids, "the check to start")
        (check,) = self.check_pids()
        assert self.scratch(), "the check runs in a scratch copy"
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        # The check dies with its runner.
        _wait_for(lambda: not _alive(check), "the check process to end")
        return check

    def check_pids(self) -> list[int]:
        return [int(p.name.split("-", 1)[1]) for p in self.marks.glob("check-*")]

    def scratch(self) -> list[Path]:
        root = self.tmp / "execsys-checks"
        return sorted(root.iterdir()) if root.is_dir() else []

    def status(self, goal: str) -> dict[str, Any]:
        done = self.cli("goal", "status", goal, "--json")
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))


@pytest.mark.slow
def test_a_killed_start_is_blocked_and_resume_finishes_it(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    goal = setup.create()
    setup.start_and_kill(goal)
    # The scratch copy goes with the check.
    _wait_for(lambda: not setup.scratch(), "the scratch copy to be removed")

    view = setup.status(goal)
    assert view["run_status"] == "BLOCKED"
    assert "runner is gone" in view["detail"]
    assert view["next"].startswith(f"execsys goal resume {goal} --expected-version 2")
    listed = json.loads(setup.cli("goal", "status", "--json").stdout)["goals"]
    assert [g["run_status"] for g in listed] == ["BLOCKED"]

    (setup.marks / "release").write_text("")
    done = setup.cli("goal", "resume", goal, "--expected-version", "2", "--reason", "killed")
    assert done.returncode == 0, done.stdout + done.stderr
    view = setup.status(goal)
    assert view["run_status"] == "CLOSED", view["detail"]
    assert not setup.scratch()
    listed = json.loads(setup.cli("goal", "status", "--json").stdout)["goals"]
    assert [g["run_status"] for g in listed] == ["CLOSED"]
    # The killed attempt stays in the journal as history: failed as interrupted, then redone.
    audit = json.loads(setup.cli("goal", "audit", goal, "--json").stdout)
    interrupted = [e for e in audit["journal"] if e["error"] == "ATTEMPT_INTERRUPTED"]
    assert len(interrupted) == 1, audit["journal"]
    node = interrupted[0]["node"]
    completed = [
        e for e in audit["journal"] if e["node"] == node and e["transition"] == "work-completed"
    ]
    assert len(completed) == 1 and completed[0]["ordinal"] > interrupted[0]["ordinal"]


@pytest.mark.slow
def test_cancel_during_a_check_ends_it_and_removes_its_scratch_copy(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    goal = setup.create()
    runner = setup.start_in_background(goal)
    _wait_for(setup.check_pids, "the check to start")
    (check,) = setup.check_pids()
    live = setup.status(goal)  # another process asks while the runner works
    assert (live["run_status"], live["detail"]) == ("RUNNING", "running (its runner is alive)")
    assert live["next"].startswith("wait: its runner is alive")
    done = setup.cli("goal", "cancel", goal, "--expected-version", "2", "--reason", "stop")
    assert done.returncode == 0, done.stderr
    runner.wait(timeout=120)
    _wait_for(lambda: not _alive(check), "the check process to end")
    assert not setup.scratch()
    view = setup.status(goal)
    assert view["run_status"] == "CANCELLED"


def test_sigterm_to_goal_start_stops_the_check_and_resume_finishes_it(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    goal = setup.create()
    runner = subprocess.Popen(
        [EXECSYS, "goal", "start", goal, "--expected-version", "1", "--store", setup.store],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=setup.env,
        text=True,
    )
    try:
        _wait_for(setup.check_pids, "the check to start")
        (check,) = setup.check_pids()
        runner.send_signal(signal.SIGTERM)
        _, err = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate()
    assert runner.returncode == 128 + signal.SIGTERM, err
    assert err.splitlines()[-1].startswith("execsys: interrupted (SIGTERM): ")
    # The check ended with its turn, and its scratch copy went with it.
    _wait_for(lambda: not _alive(check), "the check process to end")
    _wait_for(lambda: not setup.scratch(), "the scratch copy to be removed")
    view = setup.status(goal)
    assert (view["run_status"], view["delivery_status"]) == ("BLOCKED", "stopped")
    assert view["next"].startswith(f"execsys goal resume {goal} --expected-version 2")

    (setup.marks / "release").write_text("")
    done = setup.cli("goal", "resume", goal, "--expected-version", "2", "--reason", "stopped")
    assert done.returncode == 0, done.stdout + done.stderr
    assert setup.status(goal)["run_status"] == "CLOSED"
