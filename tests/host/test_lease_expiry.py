"""Leases that expire: a hung holder loses the delivery and its late writes are fenced.

Real processes, a one-second TTL, and an executor that works until the test
lets it finish. A runner is SIGSTOPped in the middle of a step; once its lease
has expired another process takes the delivery over; the first runner, resumed,
must commit nothing and end with ``LEASE_FENCED``.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
EXECSYS = Path(sys.executable).with_name("execsys")
TTL = "1"

SPEC = """
spec: execution-system/v1
graph: one-long-step
start: work
nodes:
  work:
    kind: action
    executor: worker
    outputs: {ok: {type: boolean}}
    next: done
  done: {kind: terminal, outcome: succeeded}
"""


class Scene:
    """One store, one spec, and the files the executor is steered with."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        (tmp / "spec.yaml").write_text(SPEC)
        agent = HERE / "agents" / "held.py"
        (tmp / "execsys.yaml").write_text(
            f"executors:\n  worker: {{command: [{sys.executable}, {agent}]}}\n"
        )
        self.hold = tmp / "hold"
        self.pids = tmp / "pids"
        self.log = tmp / "turns.log"
        self.env = {
            **os.environ,
            "EXECSYS_STORE": f"sqlite:///{tmp}/state.db",
            "EXECSYS_TEST_LOG": str(self.log),
            "EXECSYS_TEST_HOLD": str(self.hold),
            "EXECSYS_TEST_PIDS": str(self.pids),
        }
        self.env.pop("EXECSYS_LEASE_TTL", None)

    def execsys(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(EXECSYS), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def json(self, *args: str) -> Any:
        done = self.execsys(*args, "--json")
        assert done.stdout, done.stderr
        return json.loads(done.stdout)

    def start_held_run(self, ttl: str = TTL) -> tuple[subprocess.Popen[str], str]:
        """Start ``execsys run`` and return it once its executor is at work."""
        self.hold.write_text("")
        runner = subprocess.Popen(
            [str(EXECSYS), "run", str(self.tmp / "spec.yaml"), "--lease-ttl", ttl, "--json"],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not (self.pids.exists() and self.pids.read_text().strip()):
            assert runner.poll() is None, runner.communicate()
            assert time.monotonic() < deadline, "the executor never started"
            time.sleep(0.05)
        (delivery,) = [d["delivery"] for d in self.json("status")["deliveries"]]
        return runner, delivery

    def facts(self, delivery: str) -> dict[str, Any]:
        """What is committed: status, checkpoint, journal head and length, custody head."""
        report = self.json("inspect", delivery)
        return {
            "status": report["status"],
            "checkpoint": report["checkpoint"],
            "journal": report["journal"],
            "custody": report["custody"],
            "mismatches": report["mismatches"],
        }


def freeze(runner: subprocess.Popen[str], store: Path) -> None:
    """SIGSTOP ``runner`` at a moment it holds no write transaction of the store.

    SQLite has one write lock per file: a runner frozen inside a transaction
    blocks every writer until it resumes or dies, lease or no lease. That is a
    property of the embedded store, not what these tests are about.
    """
    for _ in range(200):
        runner.send_signal(signal.SIGSTOP)
        stat = Path(f"/proc/{runner.pid}/stat")
        while stat.read_text().rsplit(")", 1)[1].split()[0] not in {"T", "t"}:
            time.sleep(0.001)
        probe = sqlite3.connect(store, timeout=0.2)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.rollback()
            return
        except sqlite3.OperationalError:
            runner.send_signal(signal.SIGCONT)
            time.sleep(0.02)
        finally:
            probe.close()
    raise AssertionError("the runner was always inside a write transaction")


def _fenced_exit(runner: subprocess.Popen[str]) -> str:
    runner.send_signal(signal.SIGCONT)
    _, err = runner.communicate(timeout=120)
    assert runner.returncode == 1, err
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    assert err.startswith("execsys: LEASE_FENCED"), err
    return err


@pytest.mark.slow
@pytest.mark.parametrize("takeover", ["stop", "continue"])
def test_a_hung_runner_loses_its_lease_and_its_late_writes_are_fenced(
    tmp_path: Path, takeover: str
) -> None:
    scene = Scene(tmp_path)
    runner, delivery = scene.start_held_run()
    try:
        freeze(runner, tmp_path / "state.db")
        hung = scene.json("inspect", delivery)["lease"]
        assert hung["token"] == 1
        if takeover == "stop":
            done = scene.execsys("stop", delivery, "--lease-ttl", TTL, "--wait", "60", "--json")
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["status"] == "stopped"
        else:
            # The step the hung runner started is re-run by the new holder.
            scene.hold.unlink()
            done = scene.execsys(
                "recover", delivery, "--directive", "continue", "--reason", "hung runner",
                "--lease-ttl", TTL, "--json",
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["status"] == "completed"
        taken = scene.json("inspect", delivery)["lease"]
        assert taken["token"] == 2, "the takeover is a new grant"
        assert taken["holder"] != hung["holder"]
        before = scene.facts(delivery)
        scene.hold.unlink(missing_ok=True)  # the hung runner's executor may now reply
        _fenced_exit(runner)
    finally:
        if runner.poll() is None:
            runner.send_signal(signal.SIGCONT)
            runner.kill()
            runner.communicate()
    after = scene.facts(delivery)
    assert after == before, "the fenced runner applied nothing"
    assert after["mismatches"] == []
    verified = scene.json("journal", "verify", delivery)
    assert verified["ok"] is True
    if takeover == "stop":
        assert delivery in {d["delivery"] for d in scene.json("status")["needs_directive"]}
        resumed = scene.execsys(
            "recover", delivery, "--directive", "continue", "--reason", "go on", "--json"
        )
        assert json.loads(resumed.stdout)["status"] == "completed", resumed.stderr


@pytest.mark.slow
def test_a_hung_runner_past_its_ttl_is_listed_as_needing_a_directive(tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    runner, delivery = scene.start_held_run()
    try:
        freeze(runner, tmp_path / "state.db")
        deadline = time.monotonic() + 60
        while scene.json("inspect", delivery)["lease"]["state"] != "expired":
            assert time.monotonic() < deadline, "the lease never expired"
            time.sleep(0.2)
        report = scene.json("inspect", delivery)
        assert report["status"] == "running"
        assert "recover continue" in report["directives"]
        (listed,) = scene.json("status")["needs_directive"]
        assert listed["delivery"] == delivery
        assert "stopped renewing its lease" in " ".join(listed["reasons"])
        assert scene.log.read_text().splitlines() == ["work 1 1 1"], "nothing was picked up"
    finally:
        runner.send_signal(signal.SIGCONT)
        scene.hold.unlink(missing_ok=True)
        runner.communicate(timeout=120)
    # Nobody took it over, so the token never changed: the resumed runner may finish.
    assert runner.returncode == 0


def test_renewal_keeps_a_step_longer_than_the_ttl_alive(tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    ttl = 2.0  # renewed every TTL/3: a loaded machine must be late by 2/3 TTL to miss one
    runner, delivery = scene.start_held_run(str(ttl))
    try:
        time.sleep(2.5 * ttl)  # well past the first expiry of a step still at work
        report = scene.json("inspect", delivery)
        assert report["lease"]["state"] == "held", report["lease"]
        assert report["lease"]["token"] == 1
        assert scene.json("status")["needs_directive"] == []
    finally:
        scene.hold.unlink(missing_ok=True)
        out, err = runner.communicate(timeout=120)
    assert runner.returncode == 0, err
    assert json.loads(out)["status"] == "completed"
    assert scene.log.read_text().splitlines() == ["work 1 1 1"]


@pytest.mark.parametrize(
    ("where", "value"),
    [("flag", "0"), ("flag", "-3"), ("flag", "soon"), ("flag", "nan"), ("env", "inf")],
)
def test_a_bad_lease_ttl_is_one_coded_line(tmp_path: Path, where: str, value: str) -> None:
    scene = Scene(tmp_path)
    args = ["run", str(tmp_path / "spec.yaml")]
    if where == "flag":
        args += ["--lease-ttl", value]
    else:
        scene.env["EXECSYS_LEASE_TTL"] = value
    done = scene.execsys(*args)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("execsys: CONFIG_INVALID at "), done.stderr
    assert not (tmp_path / "state.db").exists(), "refused before anything was created"


DRIVING = {
    "run": ["run", "spec.yaml"],
    "input": ["input", "d-x", "--correlation", "c", "--response", "answer.json"],
    "resolve": ["resolve", "d-x", "--node", "n", "--actor", "a", "--role", "r", "--result",
                "answer.json"],
    "recover": ["recover", "d-x", "--directive", "continue", "--reason", "r"],
    "stop": ["stop", "d-x"],
    "retire": ["retire", "d-x", "--authorization", "t"],
    "goal start": ["goal", "start", "g-x", "--expected-version", "1"],
    "goal resume": ["goal", "resume", "g-x", "--expected-version", "1", "--reason", "r"],
    "goal cancel": ["goal", "cancel", "g-x", "--expected-version", "1", "--reason", "r"],
}  # fmt: skip


@pytest.mark.parametrize("command", list(DRIVING))
def test_every_driving_command_takes_the_lease_ttl(tmp_path: Path, command: str) -> None:
    scene = Scene(tmp_path)
    (tmp_path / "answer.json").write_text("{}")
    args = [str(tmp_path / a) if a.endswith((".yaml", ".json")) else a for a in DRIVING[command]]
    done = scene.execsys(*args, "--lease-ttl", "never")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "execsys: CONFIG_INVALID at --lease-ttl: lease TTL 'never' is not a number of seconds "
        "in range (expected seconds, more than 0 and at most 3600)\n"
    )
