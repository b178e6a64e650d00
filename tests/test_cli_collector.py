"""A command that drives deliveries raises the collector's young threshold; others do not.

The setting is observed from inside a real ``execsys run`` process, by the action
the delivery runs, and after ``main`` returns for a reading command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from execution_system.cli._collector import YOUNG_THRESHOLD, drives_deliveries
from execution_system.cli._main import build_parser

PYTHON_DEFAULT = 700  # CPython's young threshold, which the opt-out keeps

ACTION = """\
import gc, os


async def step(request):
    with open(os.environ["GC_PROBE"], "w") as out:
        out.write(str(gc.get_threshold()[0]))
    return {"status": "completed", "output": {}}
"""

SPEC = """\
spec: execution-system/v1
graph: gc-probe
input: {type: object}
start: probe
nodes:
  probe: {kind: action, executor: probe, next: done}
  done: {kind: terminal, outcome: succeeded}
"""

PROBE = (
    "import gc, sys; from execution_system.cli import main; "
    "code = main(sys.argv[1:]); print('THRESHOLD', gc.get_threshold()[0], code)"
)


def _execsys(folder: Path, args: list[str], opt_out: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GC_PROBE": str(folder / "threshold.txt")}
    env.pop("EXECSYS_GC", None)
    if opt_out:
        env["EXECSYS_GC"] = "default"
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args, "--store", f"sqlite:///{folder}/s.db", "--json"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.mark.parametrize("opt_out", [False, True])
def test_run_raises_the_threshold_unless_opted_out(tmp_path: Path, opt_out: bool) -> None:
    (tmp_path / "gc_probe_action.py").write_text(ACTION)
    (tmp_path / "execsys.yaml").write_text(
        'executors:\n  probe: {python: "gc_probe_action:step", timeout_s: 60}\n'
    )
    (tmp_path / "spec.yaml").write_text(SPEC)
    expected = PYTHON_DEFAULT if opt_out else YOUNG_THRESHOLD
    done = _execsys(tmp_path, ["run", str(tmp_path / "spec.yaml")], opt_out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"completed"' in done.stdout, done.stdout
    assert int((tmp_path / "threshold.txt").read_text()) == expected  # seen by the step
    assert f"THRESHOLD {expected} 0" in done.stdout

    # A reading command on the same store keeps Python's threshold.
    done = _execsys(tmp_path, ["status"], opt_out)
    assert f"THRESHOLD {PYTHON_DEFAULT} 0" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("argv", "driving"),
    [
        (["run", "spec.yaml"], True),
        (["input", "d", "--correlation", "c", "--response", "-"], True),
        (["resolve", "d", "--node", "n", "--actor", "a", "--role", "r", "--result", "-"], True),
        (["recover", "d", "--directive", "continue", "--reason", "x"], True),
        (["serve"], True),
        (["demo"], True),
        (["goal", "start", "g", "--expected-version", "1"], True),
        (["goal", "resume", "g", "--expected-version", "1", "--reason", "x"], True),
        (["goal", "cancel", "g", "--expected-version", "1", "--reason", "x"], False),
        (["goal", "status"], False),
        (["submit", "spec.yaml"], False),
        (["stop", "d"], False),
        (["status"], False),
        (["inspect", "d"], False),
        (["journal", "verify", "d"], False),
    ],
)
def test_which_commands_drive_deliveries(argv: list[str], driving: bool) -> None:
    assert drives_deliveries(build_parser().parse_args(argv)) is driving
