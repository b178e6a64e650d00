"""The layer contracts are enforced: a bad import in a copy of the tree fails lint-imports."""

from __future__ import annotations

import ast
import re
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


@pytest.mark.parametrize(
    "planted",
    [
        {"host/_bad_a.py": "import host._bad_b\n", "host/_bad_b.py": "import host._bad_a\n"},
        {
            "host/_bad.py": "from host._core import HostCore\n",
            "host/_core.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import host._bad\n"
            ),
        },
        {
            "host/storage/_bad.py": "import host._lease\n",
            "host/_lease.py": "import host.storage._bad\n",
        },
    ],
    ids=["direct", "type-checking-only", "across-packages"],
)
def test_an_import_cycle_in_host_breaks_a_contract(tmp_path: Path, planted: dict[str, str]) -> None:
    _copy_tree(tmp_path)
    for module, text in planted.items():  # appended: a planted line joins what is there
        path = tmp_path / module
        path.write_text((path.read_text() if path.exists() else "") + text)
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "No import cycles within host BROKEN" in result.stdout


PRODUCT_DRIVERS = "No database driver in execution_system (storage via the Host)"


@pytest.mark.parametrize(
    ("module", "line"),
    [
        ("execution_system/_bad.py", "import sqlite3\n"),
        ("execution_system/codeclosure/_bad.py", "from sqlite3 import connect\n"),
        ("execution_system/codeclosure/_bad.py", "import psycopg\n"),
        ("execution_system/cli/_bad.py", "from psycopg_pool import ConnectionPool\n"),
        ("execution_system/cli/_bad.py", "from host.storage.postgres import shown\n"),
        ("execution_system/web/_bad.py", "import host.storage.sqlite\n"),
    ],
)
def test_a_driver_import_in_the_product_breaks_its_contract(
    tmp_path: Path, module: str, line: str
) -> None:
    _copy_tree(tmp_path)
    (tmp_path / module).write_text(line)
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert f"{PRODUCT_DRIVERS} BROKEN" in result.stdout, result.stdout


_SQL = re.compile(
    r"\b(SELECT\s.+\sFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM"
    r"|CREATE\s+(TABLE|INDEX)|PRAGMA\s)",
    re.DOTALL,  # the code base writes its SQL keywords in capitals; prose is not SQL
)


def _sql_strings(package: Path) -> list[str]:
    """Every string literal under ``package`` that reads as an SQL statement, as file:line."""
    return [
        f"{path.relative_to(package)}:{node.lineno}"
        for path in sorted(package.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and _SQL.search(node.value)
    ]


def test_the_product_holds_no_sql() -> None:
    assert _sql_strings(ROOT / "execution_system") == []


def test_the_sql_finder_finds_sql(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text('Q = "UPDATE execsys_goals SET state = ? WHERE goal = ?"\n')
    (tmp_path / "n.py").write_text('"""Select a goal from the list of goals."""\n')
    assert _sql_strings(tmp_path) == ["m.py:1"]
    assert _sql_strings(ROOT / "host" / "storage" / "sqlite"), "the backend's SQL is found"
