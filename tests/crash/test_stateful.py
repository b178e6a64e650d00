"""A state machine over what users and operators do, with SIGKILL of the runner at random.

Hypothesis drives one delivery of the crash suite's graph (an action-input, a
subset fan-out with a retry, an action that writes, a workflow wait) through
real operations: ``execsys`` processes for everything that drives the delivery
(``run``, ``input``, ``resolve``, ``recover``), each of which may be SIGKILLed
at a random write boundary, and the Host's API for ``stop``, cancel and
``retire``. After every step:

* the journal verifies, and equals what the checkpoint's view says (inspect
  replays it and reports no mismatch; custody may be ahead of the checkpoint
  only right after a kill, and only a directive resolves it);
* no turn ran twice (but the continuation turn of an answered question cut
  short by a kill, which re-runs under the same key by design);
* no executor process survives the runner that started it;
* nothing ends ``completed`` after a cancel.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

HERE = Path(__file__).resolve().parent
EXECSYS = str(Path(sys.executable).with_name("execsys"))
FAULTS = st.one_of(
    st.just(""),
    st.builds(
        "{}:{}:{}".format,
        st.sampled_from(["put", "put_writes", "custody-validate", "custody-advance"]),
        st.integers(1, 6),
        st.sampled_from(["before", "after"]),
    ),
)
ENDED = {"completed", "failed", "cancelled", "retired"}


def _leftovers(marker: bytes) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in environ and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


class DeliveryMachine(RuleBasedStateMachine):
    """One delivery, driven by users, operators and crashes."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(os.environ["EXECSYS_STATEFUL_ROOT"]) / f"m{id(self):x}"
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        (self.root / "execsys.yaml").write_text(
            "executors:\n"
            f"  planner: {{command: [{sys.executable}, {HERE / 'agents' / 'steps.py'}, planner]}}\n"
            f"  worker: {{command: [{sys.executable}, {HERE / 'agents' / 'steps.py'}, worker]}}\n"
        )
        shutil.copy(HERE / "spec.yaml", self.root / "spec.yaml")
        (self.root / "input.json").write_text('{"topic": "stateful"}')
        (self.root / "answer.json").write_text('["a", "c"]')
        (self.root / "approval.json").write_text('{"approved": true}')
        (self.root / "authority.yaml").write_text(
            "actors: {alice: [maintainer]}\napprover: alice\n"
        )
        self.delivery: str | None = None
        self.cancelled = False
        self.killed = False

    # --- helpers -----------------------------------------------------------------------

    def _env(self, fault: str = "") -> dict[str, str]:
        env = {
            **os.environ,
            "EXECSYS_STORE": f"sqlite:///{self.root}/state.db",
            "EXECSYS_TEST_LOG": str(self.root / "turns.log"),
        }
        env.pop("EXECSYS_FAULT_KILL_AT", None)
        if fault:
            env["EXECSYS_FAULT_KILL_AT"] = fault
        return env

    def _cli(self, *args: str, fault: str = "") -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [EXECSYS, *args],
            env=self._env(fault),
            capture_output=True,
            text=True,
            timeout=120,
            cwd=self.root,
            check=False,
        )
        assert "Traceback" not in done.stderr, done.stderr
        if done.returncode == -9:
            self.killed = True
        else:
            assert done.returncode in (0, 1), done.stderr
            if done.returncode == 1:
                assert done.stderr.startswith("execsys: "), done.stderr
        return done

    def _host(self) -> Any:
        from execution_system._compose import open_runner

        os.environ["EXECSYS_TEST_LOG"] = str(self.root / "turns.log")
        return open_runner(f"sqlite:///{self.root}/state.db")

    def _status(self) -> str:
        if self.delivery is None:
            return "none"
        runner = self._host()
        try:
            return str(runner.host.status(self.delivery).status.value)
        finally:
            runner.close()

    # --- rules -------------------------------------------------------------------------

    @precondition(lambda self: self.delivery is None)
    @rule(fault=FAULTS)
    def run(self, fault: str) -> None:
        self._cli(
            "run",
            "spec.yaml",
            "--input",
            "input.json",
            "--authority",
            "authority.yaml",
            "--json",
            fault=fault,
        )
        listing = json.loads(self._cli("status", "--json").stdout)
        if listing["deliveries"]:
            self.delivery = str(listing["deliveries"][0]["delivery"])

    @precondition(lambda self: self.delivery is not None)
    @rule(fault=FAULTS)
    def answer(self, fault: str) -> None:
        assert self.delivery is not None
        status = json.loads(self._cli("status", self.delivery, "--json").stdout)
        if not status.get("suspension"):
            return
        correlation = status["suspension"]["correlation"]
        self._cli(
            "input",
            self.delivery,
            "--correlation",
            correlation,
            "--response",
            "answer.json",
            "--json",
            fault=fault,
        )

    @precondition(lambda self: self.delivery is not None)
    @rule(fault=FAULTS)
    def resolve(self, fault: str) -> None:
        assert self.delivery is not None
        self._cli(
            "resolve",
            self.delivery,
            "--node",
            "approve",
            "--actor",
            "alice",
            "--role",
            "maintainer",
            "--result",
            "approval.json",
            "--json",
            fault=fault,
        )

    @precondition(lambda self: self.delivery is not None)
    @rule(fault=FAULTS)
    def recover_continue(self, fault: str) -> None:
        assert self.delivery is not None
        done = self._cli(
            "recover", self.delivery, "--directive", "continue", "--reason", "r", fault=fault
        )
        if done.returncode != -9:
            self.killed = False

    @precondition(lambda self: self.delivery is not None)
    @rule(pick=st.integers(0, 10))
    def recover_restart(self, pick: int) -> None:
        assert self.delivery is not None
        view = json.loads(self._cli("inspect", self.delivery, "--json").stdout)
        savepoints = view.get("savepoints") or []
        if not savepoints:
            return
        chosen = savepoints[pick % len(savepoints)]["savepoint"]
        done = self._cli(
            "recover",
            self.delivery,
            "--directive",
            "restart-from-savepoint",
            "--savepoint",
            chosen,
            "--reason",
            "r",
        )
        if done.returncode == 0:
            self.killed = False

    @precondition(lambda self: self.delivery is not None)
    @rule()
    def stop(self) -> None:
        assert self.delivery is not None
        self._cli("stop", self.delivery, "--reason", "s", "--wait", "5")

    @precondition(lambda self: self.delivery is not None and not self.cancelled)
    @rule()
    def cancel(self) -> None:
        from contracts import ExecsysError

        runner = self._host()
        try:
            asyncio.run(runner.host.cancel(self.delivery, actor="op", reason="c"))
            self.cancelled = True
            self.killed = False
        except ExecsysError:
            pass
        finally:
            runner.close()

    @precondition(lambda self: self.delivery is not None)
    @rule()
    def retire(self) -> None:
        assert self.delivery is not None
        self._cli("retire", self.delivery, "--authorization", "auth-1")

    # --- invariants --------------------------------------------------------------------

    @invariant()
    def journal_and_checkpoint_agree(self) -> None:
        if self.delivery is None:
            return
        from host.journal import verify_lines

        runner = self._host()
        try:
            host = runner.host
            verdict = verify_lines(host.journal_lines(self.delivery))
            view = host.inspect(self.delivery)
        finally:
            runner.close()
        assert verdict.ok, verdict
        mismatches = list(view.mismatches)
        if self.killed:
            mismatches = [m for m in mismatches if not m.startswith("custody head ")]
        assert mismatches == [], view.mismatches

    @invariant()
    def no_turn_ran_twice(self) -> None:
        log = self.root / "turns.log"
        if not log.exists():
            return
        repeated = [t for t, n in Counter(log.read_text().splitlines()).items() if n > 1]
        assert all(t.split()[3] != "1" for t in repeated), repeated

    @invariant()
    def no_executor_outlives_its_runner(self) -> None:
        marker = f"EXECSYS_TEST_LOG={self.root}/turns.log".encode()
        assert _leftovers(marker) == []

    @invariant()
    def a_completed_delivery_kept_only_the_completing_attempts_writes(self) -> None:
        if self._status() != "completed":
            return
        from execution_system.custody import FileCustody

        runner = self._host()
        try:
            view = runner.host.inspect(self.delivery)
            lines = runner.host.journal_lines(self.delivery)
        finally:
            runner.close()
        done = [
            json.loads(line)
            for line in lines[1:]
            if b'"work-completed"' in line and b'"node":"edit"' in line
        ]
        attempt = done[-1]["attempt"]["sequence"]
        custody = FileCustody(self.root / "custody")
        files = [e.path for e in custody.manifest(self.delivery, view.custody.savepoint)]
        assert files == [f"out/edit-{attempt}.txt"], files

    @invariant()
    def nothing_completes_after_a_cancel(self) -> None:
        if self.cancelled:
            assert self._status() in {"cancelled", "retired"}


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_users_operators_and_crashes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXECSYS_STATEFUL_ROOT", str(tmp_path))
    machine = DeliveryMachine.TestCase
    machine.settings = settings(
        max_examples=5,
        stateful_step_count=8,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        derandomize=True,
    )
    machine().runTest()
