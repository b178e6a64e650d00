"""The real custody under the Host: capabilities reach command executors and bite at commit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXECSYS = str(Path(sys.executable).with_name("execsys"))

SPEC = """
spec: execution-system/v1
graph: custody
start: write
nodes:
  write: {kind: action, executor: writer, workspace: write, paths: [notes.txt],
          outputs: {ok: {type: boolean}}, next: peek}
  peek: {kind: action, executor: sneaky, outputs: {ok: {type: boolean}},
         on_failure: refused, next: done}
  refused: {kind: terminal, outcome: blocked}
  done: {kind: terminal, outcome: succeeded}
"""


def _setup(tmp: Path) -> dict[str, str]:
    (tmp / "spec.yaml").write_text(SPEC)
    agent = HERE / "agents.py"
    (tmp / "execsys.yaml").write_text(
        "executors:\n"
        f"  writer: {{command: [{sys.executable}, {agent}, writer]}}\n"
        f"  sneaky: {{command: [{sys.executable}, {agent}, sneaky]}}\n"
    )
    return {**os.environ, "EXECSYS_STORE": f"sqlite:///{tmp}/state.db"}


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXECSYS, *args], env=env, capture_output=True, text=True, check=False, timeout=120
    )


def test_a_write_under_a_read_capability_is_refused_and_restored(tmp_path: Path) -> None:
    env = _setup(tmp_path)
    done = _run(env, "run", str(tmp_path / "spec.yaml"), "--json")
    report = json.loads(done.stdout)
    assert (report["status"], report["outcome"]) == ("failed", "blocked")
    inspect = json.loads(_run(env, "inspect", report["delivery"], "--json").stdout)
    assert inspect["mismatches"] == []
    workspace = tmp_path / "custody" / "workspaces" / report["delivery"]
    assert (workspace / "notes.txt").read_text() == "turn 1\n", "the write step committed"
    assert not (workspace / "sneaky.txt").exists(), "the refused write was restored away"
    events = [
        json.loads(line)
        for line in _run(env, "journal", "export", report["delivery"]).stdout.splitlines()[1:]
    ]
    failed = [e for e in events if e["node"] == "peek" and e["transition"] == "work-failed"]
    assert failed[0]["error"]["code"] == "CUSTODY_WRITE_UNDER_READ"


def test_custody_ahead_of_the_checkpoint_is_shown_and_resolved_by_continue(
    tmp_path: Path,
) -> None:
    env = _setup(tmp_path)
    # Kill inside the transaction that would commit the writer's step: custody has
    # already advanced to the new savepoint, the checkpoint has not.
    killed = subprocess.run(
        [EXECSYS, "run", str(tmp_path / "spec.yaml"), "--json"],
        env={**env, "EXECSYS_FAULT_KILL_AT": "put:3:before"},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert killed.returncode == -9
    listing = json.loads(_run(env, "status", "--json").stdout)
    delivery = listing["deliveries"][0]["delivery"]
    reasons = " ".join(listing["needs_directive"][0]["reasons"])
    assert "custody head" in reasons, reasons
    inspect = json.loads(_run(env, "inspect", delivery, "--json").stdout)
    assert inspect["custody"]["head"] != inspect["custody"]["savepoint"]
    recovered = _run(env, "recover", delivery, "--directive", "continue", "--reason", "crash")
    assert recovered.returncode in {0, 1}, recovered.stderr
    inspect = json.loads(_run(env, "inspect", delivery, "--json").stdout)
    assert inspect["mismatches"] == []
    assert inspect["nodes"]["write"]["state"] == "completed"
    workspace = tmp_path / "custody" / "workspaces" / delivery
    assert (workspace / "notes.txt").read_text() == "turn 1\n", (
        "the step ran again on a restored tree"
    )
