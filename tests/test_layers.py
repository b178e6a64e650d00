"""The layer contracts are enforced: a bad import in a copy of the tree fails lint-imports."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _copy_tree(dest: Path) -> None:
    for package in ("contracts", "host", "runner", "execution_system"):
        shutil.copytree(
            ROOT / package, dest / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")


def _lint(where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=where,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(where), "PATH": "/usr/bin:/bin"},
        check=False,
    )


def test_the_real_tree_keeps_its_contracts(tmp_path: Path) -> None:
    _copy_tree(tmp_path)
    result = _lint(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("contracts/_bad.py", "import host\n", "Layers"),
        ("host/_bad.py", "import runner\n", "Layers"),
        ("runner/_bad.py", "import execution_system\n", "Layers"),
        ("host/_bad.py", "import langgraph\n", "LangGraph"),
        ("execution_system/_bad.py", "import langgraph.graph\n", "LangGraph"),
        (
            "execution_system/_bad.py",
            "import host.langgraph\n",
            "never reaches into host.langgraph",
        ),
        ("host/_bad.py", "import sqlite3\n", "no LangGraph, no database driver"),
        ("host/_bad.py", "import psycopg\n", "no LangGraph, no database driver"),
        ("host/storage/_bad.py", "import sqlite3\n", "no LangGraph, no database driver"),
        ("host/storage/_bad.py", "import langgraph.graph\n", "LangGraph"),
        ("host/storage/sqlite/_bad.py", "import langgraph\n", "LangGraph"),
        ("host/journal/_bad.py", "from sqlite3 import connect\n", "no database driver"),
    ],
)
def test_a_bad_import_breaks_a_contract(
    tmp_path: Path, module: str, line: str, broken: str
) -> None:
    _copy_tree(tmp_path)
    (tmp_path / module).write_text(line)
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert broken in result.stdout.split("BROKEN")[0].splitlines()[-1] or broken in result.stdout
