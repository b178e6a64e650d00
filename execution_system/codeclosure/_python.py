"""The project's Python: which interpreter a check runs under, and what it would import.

A check must test the candidate, not some installed copy of the project. Three
rules make that hold:

* the interpreter is the project's, never the product's by default: ``--python
  PATH``, else ``<project>/.venv`` or ``<project>/venv``, else ``python3`` on
  ``PATH`` (refused when that turns out to be the product's own interpreter);
* every check runs with the candidate first on the import path
  (``PYTHONPATH=<candidate>/src:<candidate>:...``);
* when a check's first word is a Python interpreter (or a script whose ``#!``
  names one), ``goal create`` runs that interpreter with the check's own
  interpreter flags and the same import path, in the project folder, and asks
  where each of the project's top-level packages would be imported from; a
  package that would come from outside the project is refused
  (``CHECK_NOT_CANDIDATE``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from contracts import ErrorCode, error
from execution_system.custody import DEFAULT_EXCLUDED

_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)*)?$")
_VENVS = (".venv", "venv")
#: Interpreter options that take no value and may precede ``-m``/``-c``/a script.
_FLAGS = re.compile(r"^-[bBdEIOPqsSuvR]+$")
_PROBE = (
    "import importlib.util, json, sys\n"
    "names = json.loads(sys.argv[1])\n"
    "found = {}\n"
    "for name in names:\n"
    "    try:\n"
    "        spec = importlib.util.find_spec(name)\n"
    "    except Exception as exc:\n"
    "        found[name] = 'error: ' + type(exc).__name__\n"
    "        continue\n"
    "    if spec is None:\n"
    "        found[name] = None\n"
    "    elif spec.origin not in (None, 'namespace'):\n"
    "        found[name] = spec.origin\n"
    "    else:\n"
    "        found[name] = (list(spec.submodule_search_locations or []) or [None])[0]\n"
    "print(json.dumps({'prefix': sys.prefix, 'found': found}))\n"
)


def product_prefix() -> str:
    """``sys.prefix`` of the interpreter running execsys itself."""
    return os.path.realpath(sys.prefix)


def import_path(root: Path, existing: str | None = None) -> str:
    """``PYTHONPATH`` that puts the tree at ``root`` first (``src/`` before the root)."""
    parts = [os.fspath(root / "src")] if (root / "src").is_dir() else []
    parts.append(os.fspath(root))
    if existing:
        parts.append(existing)
    return os.pathsep.join(parts)


def candidate_env(root: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a check runs in: ``base`` with the candidate first on the import path."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = import_path(root, env.get("PYTHONPATH"))
    env.pop("PYTHONHOME", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def discover(project: Path, explicit: str | None) -> str:
    """The project's interpreter by the documented rule (absolute path)."""
    if explicit is not None:
        path = Path(explicit).expanduser()
        found = shutil.which(os.fspath(path)) if path.parent == Path() else None
        chosen = Path(found) if found else path.absolute()
        if not (chosen.is_file() and os.access(chosen, os.X_OK)):
            raise error(
                ErrorCode.CHECK_CANNOT_START,
                "the given Python is not an executable file",
                path="--python",
                expected="the path of the project's interpreter, e.g. .venv/bin/python",
            )
        return os.fspath(chosen)
    for venv in _VENVS:
        candidate = project / venv / "bin" / "python"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return os.fspath(candidate.absolute())
    on_path = shutil.which("python3") or shutil.which("python")
    if on_path is None:
        raise error(
            ErrorCode.CHECK_CANNOT_START,
            "no Python found for the project (no .venv/ or venv/, none on PATH)",
            path="--python",
            expected="--python PATH (the project's interpreter)",
        )
    if os.path.realpath(_prefix_of(on_path) or "") == product_prefix():
        raise error(
            ErrorCode.CHECK_NOT_CANDIDATE,
            f"the python on PATH ({on_path}) is execsys's own interpreter, "
            "which would test whatever is installed there, not the candidate",
            path="--python",
            expected="--python PATH (the project's interpreter), or a project .venv/",
        )
    return on_path


def _prefix_of(python: str) -> str | None:
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print(sys.prefix)"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def interpreter_of(argv: Sequence[str], project: Path) -> tuple[str, list[str]] | None:
    """(interpreter, its flags) of a check, when it can be told; else None."""
    program = argv[0]
    if _PYTHON_NAME.match(Path(program).name):
        flags = []
        for word in argv[1:]:
            if not _FLAGS.match(word):
                break
            flags.append(word)
        return program, flags
    located = shutil.which(program) or (
        os.fspath(project / program) if (project / program).is_file() else None
    )
    if located is None:
        return None
    try:
        with open(located, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if words and Path(words[0]).name == "env":
        words = words[1:]
    if words and _PYTHON_NAME.match(Path(words[0]).name):
        return words[0], [w for w in words[1:] if _FLAGS.match(w)]
    return None


def top_level_names(project: Path) -> list[str]:
    """The project's own importable top-level names (``src/`` layout, or root packages)."""
    names: set[str] = set()
    src = project / "src"
    if src.is_dir():
        for child in src.iterdir():
            if child.is_dir() and child.name.isidentifier() and any(child.glob("*.py")):
                names.add(child.name)
            elif child.suffix == ".py" and child.stem.isidentifier():
                names.add(child.stem)
    else:
        for child in project.iterdir():
            if (
                child.is_dir()
                and child.name.isidentifier()
                and not child.name.startswith(("test", "."))
                and (child / "__init__.py").is_file()
            ):
                names.add(child.name)
    return sorted(names)[:20]


def check_sees_candidate(name: str, argv: Sequence[str], project: Path) -> None:
    """Refuse a check that would import the project's packages from elsewhere."""
    told = interpreter_of(argv, project)
    names = top_level_names(project)
    if told is None or not names:
        return
    python, flags = told
    try:
        done = subprocess.run(
            [python, *flags, "-c", _PROBE, json.dumps(names)],
            cwd=project,
            env=candidate_env(project),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        raise error(
            ErrorCode.CHECK_CANNOT_START,
            f"check '{name}' cannot start: its interpreter {python!r} does not run",
            path=f"--check {name}",
            expected="an existing Python interpreter",
        ) from None
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])["found"]
    except (IndexError, ValueError, KeyError, TypeError):
        return  # not a Python we can question: nothing can be told
    root = os.path.realpath(project)
    for package, origin in found.items():
        if origin is None or str(origin).startswith("error: "):
            continue
        real = os.path.realpath(origin)
        inside = real == root or real.startswith(root + os.sep)
        parts = Path(os.path.relpath(real, root)).parts if inside else ()
        if not inside or DEFAULT_EXCLUDED.intersection(parts):
            raise error(
                ErrorCode.CHECK_NOT_CANDIDATE,
                f"check '{name}' would import '{package}' from {origin}, not from the candidate",
                path=f"--check {name}",
                expected="a check whose interpreter honours PYTHONPATH (no -I/-E), "
                "or the project's own interpreter (--python PATH)",
            )
