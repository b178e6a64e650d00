"""Commands that execute no graph never import LangGraph (their start-up cost is contract)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = (
    "import sys; from execution_system.cli import main; "
    "code = main(sys.argv[1:]); "
    "print('LANGGRAPH' if 'langgraph' in sys.modules else 'CLEAN', code, file=sys.stderr)"
)


@pytest.mark.parametrize(
    "args",
    [
        ["status"],
        ["status", "d-000000000000000000000000"],
        ["inspect", "d-000000000000000000000000"],
        ["journal", "verify", "d-000000000000000000000000"],
        ["graph", "check", str(ROOT / "examples" / "triage" / "spec.yaml")],
        ["goal", "status"],
    ],
)
def test_reading_commands_do_not_import_langgraph(tmp_path: Path, args: list[str]) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            *args,
            *(["--store", f"sqlite:///{tmp_path}/s.db"] if args[0] != "graph" else []),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "CLEAN" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
