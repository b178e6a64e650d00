"""``execsys run`` shows node transitions on a terminal, and nothing extra on a pipe."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXECSYS = str(Path(sys.executable).with_name("execsys"))
TRIAGE = ROOT / "examples" / "triage"

pytestmark = pytest.mark.slow  # real runs of the triage example, on a pseudo-terminal


def _argv(tmp: Path) -> list[str]:
    return [
        EXECSYS, "run", str(TRIAGE / "spec.yaml"),
        "--input", str(TRIAGE / "input.yaml"),
        "--authority", str(TRIAGE / "authority.yaml"),
        "--store", f"sqlite:///{tmp / 'state.db'}",
    ]  # fmt: skip


def _on_a_terminal(argv: list[str]) -> str:
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        argv, stdout=follower, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not data:
            break
        chunks.append(data)
    process.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode()


def test_run_on_a_terminal_shows_each_transition(tmp_path: Path) -> None:
    out = _on_a_terminal(_argv(tmp_path))
    assert "plan#1  work-started (attempt 1)" in out
    assert "signoff#1  work-blocked" in out
    assert ": waiting" in out


def test_run_on_a_pipe_or_with_json_prints_only_its_result(tmp_path: Path) -> None:
    piped = subprocess.run(
        _argv(tmp_path), capture_output=True, text=True, timeout=120, check=False
    )
    assert "work-started" not in piped.stdout and piped.stdout.startswith("delivery ")
    as_json = _on_a_terminal([*_argv(tmp_path / "j"), "--json"])
    assert "work-started" not in as_json and as_json.lstrip().startswith("{")
