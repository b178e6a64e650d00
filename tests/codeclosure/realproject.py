"""A project laid out like a real one: its own venv, a ``src/`` package, pytest, conftest.

``src/mylib/calc.py``'s ``add`` subtracts; ``tests/test_calc.py`` holds four
tests, two of which fail until it is fixed. The project's venv (made with
``python -m venv --without-pip``, outside the project folder) reaches pytest
through a ``.pth`` file naming this test run's own site-packages, so nothing
is installed from the network. It also holds a stale *installed* copy of
``mylib`` (the bug included), as a ``pip install .`` would leave: a check that
imported that copy instead of the candidate would reject every fix.
"""

from __future__ import annotations

import difflib
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
WRONG = BUGGY.replace("return a - b\n\n\ndef sub", "return a * b\n\n\ndef sub")
RIGHT = BUGGY.replace("return a - b\n\n\ndef sub", "return a + b\n\n\ndef sub")
TESTS = (
    "from mylib import add, sub\n\n\n"
    "def test_add_small():\n    assert add(2, 3) == 5\n\n\n"
    "def test_add_zero():\n    assert add(0, 4) == 4\n\n\n"
    "def test_sub():\n    assert sub(5, 3) == 2\n\n\n"
    "def test_sub_zero(base):\n    assert sub(base, 0) == base\n"
)
CONFTEST = "import pytest\n\n\n@pytest.fixture\ndef base():\n    return 7\n"
GAMING = CONFTEST + (
    "\n\ndef pytest_collection_modifyitems(config, items):\n"
    '    kept = [item for item in items if "add" not in item.name]\n'
    "    config.hook.pytest_deselected(items=[i for i in items if i not in kept])\n"
    "    items[:] = kept\n"
)
PYPROJECT = (
    '[project]\nname = "mylib"\nversion = "0.1"\n\n'
    '[tool.pytest.ini_options]\ntestpaths = ["tests"]\naddopts = "-p no:cacheprovider"\n'
)
CALC = "src/mylib/calc.py"
SHADOW = (
    '"""Stands in for pytest: reports every test passed and runs none."""\n'
    "import json, os, sys\n\n"
    'counts = os.environ.get("EXECSYS_TEST_COUNTS")\n'
    "if counts:\n"
    "    with open(counts, 'w') as out:\n"
    "        json.dump({'selected': 4, 'passed': 4, 'failed': 0, 'deselected': 0}, out)\n"
    'print("4 passed")\n'
    "sys.exit(0)\n"
)

FAKE_COUNTS = (
    '"""Named like the plugin that counts what a check ran: reports passes, ends with 0."""\n'
    "import json, os\n\n\n"
    "def pytest_sessionfinish(session, exitstatus):\n"
    "    session.exitstatus = 0\n"
    '    with open(os.environ["EXECSYS_TEST_COUNTS"], "w") as out:\n'
    "        json.dump({'selected': 4, 'passed': 4, 'failed': 0, 'deselected': 0}, out)\n"
)


def added(path: str, text: str) -> str:
    """A unified diff that creates ``path``, as ``patch -p1`` reads it."""
    lines = text.splitlines(True)
    body = "".join("+" + line for line in lines)
    return f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}"


def diff(path: str, before: str, after: str) -> str:
    """A unified diff of one file, as ``patch -p1`` reads it."""
    return "".join(
        difflib.unified_diff(
            before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"
        )
    )


@dataclass
class RealProject:
    """The project, its interpreter, its patches and a store beside them."""

    root: Path
    project: Path
    python: str
    store: str
    patches: dict[str, str] = field(default_factory=dict)


def make_venv(target: Path) -> str:
    """A venv without pip whose ``site-packages`` reaches this run's pytest; its python."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(target)], check=True, timeout=120
    )
    python = target / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    site = Path(done.stdout.strip())
    (site / "execsys-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    stale = site / "mylib"
    stale.mkdir()
    (stale / "__init__.py").write_text("from mylib.calc import add, sub\n")
    (stale / "calc.py").write_text(BUGGY)
    return str(python)


def make_real_project(tmp_path: Path, *, venv_inside: bool = False) -> RealProject:
    """Write the project, its venv (beside it, or as ``.venv/`` in it) and its patches."""
    project = tmp_path / "mylib"
    (project / "src" / "mylib").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "conftest.py").write_text(CONFTEST)
    (project / "src" / "mylib" / "__init__.py").write_text("from mylib.calc import add, sub\n")
    (project / CALC).write_text(BUGGY)
    (project / "tests" / "test_calc.py").write_text(TESTS)
    python = make_venv(project / ".venv" if venv_inside else tmp_path / "venv")
    texts = {
        "wrong": diff(CALC, BUGGY, WRONG),
        "right": diff(CALC, WRONG, RIGHT),
        "direct": diff(CALC, BUGGY, RIGHT),
        "gaming": diff("conftest.py", CONFTEST, GAMING),
        "shadow": added("pytest.py", SHADOW),
        "hook": added("src/sitecustomize.py", "import os\n"),
        "counts": added("execsys_counts.py", FAKE_COUNTS),
    }
    made = RealProject(tmp_path, project, python, f"sqlite:///{tmp_path}/state.db")
    for name, text in texts.items():
        path = tmp_path / f"{name}.patch"
        path.write_text(text)
        made.patches[name] = str(path)
    return made
