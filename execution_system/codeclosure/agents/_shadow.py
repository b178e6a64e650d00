"""Modules a candidate adds that would stand in for what its check imports.

A check runs in a copy of the candidate with the candidate first on the import
path, so that the tests import the candidate's code. That also means a module
the candidate adds at the top of that path wins over an installed one of the
same name: a ``pytest.py`` beside ``pyproject.toml`` replaces pytest itself,
and a ``sitecustomize.py`` runs before anything else in every Python process
of the check. Either can report a pass for tests that never ran.

The rule: a top-level module or package that the candidate adds (one the base
did not have, at the project root or in ``src/``) may not be one the check's
interpreter would otherwise import from elsewhere, and may never be one of
Python's start-up hooks. The check is then not run; its evidence names the
modules, and the verdict counts it as failed.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from execution_system.codeclosure._python import interpreter_of

STARTUP_HOOKS = frozenset({"sitecustomize", "usercustomize"})
"""Modules Python imports by itself at start-up when they are on the import path."""

_PROBE = (
    "import importlib.util, json, sys\n"
    "found = []\n"
    "for name in json.loads(sys.argv[1]):\n"
    "    try:\n"
    "        if importlib.util.find_spec(name) is not None:\n"
    "            found.append(name)\n"
    "    except Exception:\n"
    "        found.append(name)\n"
    "print(json.dumps(found))\n"
)


def top_modules(root: Path) -> list[str]:
    """Regular top-level modules and packages at ``root`` and ``root/src`` (import roots).

    A folder without ``__init__.py`` is left out: as a namespace package it
    never wins over a regular module of the same name further down the path.
    """
    names: set[str] = set()
    for folder in (root / "src", root):
        if not folder.is_dir():
            continue
        for child in folder.iterdir():
            if child.is_file() and child.suffix in {".py", ".pyc", ".so"}:
                stem = child.name.split(".", 1)[0]
                if stem.isidentifier():
                    names.add(stem)
            elif child.is_dir() and child.name.isidentifier() and (child / "__init__.py").exists():
                names.add(child.name)
    return sorted(names)


def shadowing(argv: Sequence[str], tree: Path, base: Iterable[str] | None) -> list[str]:
    """The modules ``tree`` adds over ``base`` that would replace what ``argv`` imports.

    ``base`` is the base's :func:`top_modules` (None when unknown: only the
    start-up hooks are then refused). Names are asked of the check's interpreter
    (when its first word or ``#!`` names one) in isolated mode, from an empty
    folder, so only what it finds outside the candidate counts.
    """
    known = set(base) if base is not None else None
    added = [n for n in top_modules(tree) if known is None or n not in known]
    found = sorted(n for n in added if n in STARTUP_HOOKS)
    asked = [n for n in added if n not in STARTUP_HOOKS] if known is not None else []
    told = interpreter_of(argv, tree) if asked else None
    if told is None:
        return found
    python, _ = told
    with tempfile.TemporaryDirectory(prefix="execsys-probe-") as empty:
        try:
            done = subprocess.run(
                [python, "-I", "-c", _PROBE, json.dumps(asked)],
                cwd=empty,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
                stdin=subprocess.DEVNULL,
            )
            shadowed = json.loads(done.stdout.strip().splitlines()[-1])
        except (OSError, subprocess.TimeoutExpired, IndexError, ValueError):
            return found
    return sorted({*found, *(str(n) for n in shadowed if n in asked)})
