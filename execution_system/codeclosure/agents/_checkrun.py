"""Running one check against a scratch copy of a tree, and cleaning up after it.

Scratch copies live under ``<tmp>/execsys-checks/`` named
``<delivery>.<pid>.<random>``: the agent that made one removes it when it
ends (also on SIGTERM), and :func:`sweep` removes those whose agent died
without a chance to (SIGKILL) or that belong to a cancelled delivery.

The check runs in its agent's process group, which the executor kills as a
whole at a deadline or a cancel; the agent gets SIGTERM when its runner dies
(``PR_SET_PDEATHSIG``, Linux) and then kills the check before it exits. So a
killed ``goal start`` leaves no check running under PID 1.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import itertools
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execution_system.codeclosure._python import candidate_env
from execution_system.codeclosure._source import copy_source

PLUGIN = "execsys_counts"
"""The counting plugin's module name, before the random part each check run adds.

``python -m pytest`` puts the check's folder (the candidate) first on the
import path, so a fixed name could be taken by a module the candidate adds."""
_PR_SET_PDEATHSIG = 1
_SAFE = re.compile(r"[^A-Za-z0-9_-]")


def scratch_root() -> Path:
    """Where every scratch copy is made."""
    return Path(tempfile.gettempdir()) / "execsys-checks"


@dataclass
class Outcome:
    """What a check did."""

    exit_status: int
    output: bytes
    duration_s: float
    observed: str
    tests: dict[str, Any] | None


def is_pytest(argv: Sequence[str]) -> bool:
    """Whether the check runs pytest (so its counts can be recorded)."""
    names = [Path(word).name for word in argv]
    if names and names[0] in {"pytest", "py.test"}:
        return True
    return any(a == "-m" and b == "pytest" for a, b in itertools.pairwise(argv))


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """Ask the kernel to send ``signum`` to this process when its parent dies (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signum))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(delivery: str | None = None) -> int:
    """Remove scratch copies whose agent is gone (and all of ``delivery``'s); their count."""
    root = scratch_root()
    removed = 0
    if not root.is_dir():
        return 0
    mine = _SAFE.sub("_", delivery) if delivery else None
    for child in root.iterdir():
        owner, _, rest = child.name.partition(".")
        pid = rest.split(".", 1)[0]
        dead = not pid.isdigit() or not _alive(int(pid))
        if dead or (mine is not None and owner == mine):
            shutil.rmtree(child, ignore_errors=True)
            removed += 1
    return removed


@contextlib.contextmanager
def scratch(delivery: str) -> Iterator[Path]:
    """A fresh scratch folder for this agent, removed when it ends or is terminated."""
    root = scratch_root()
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{_SAFE.sub('_', delivery)}.{os.getpid()}.", dir=root))
    previous = signal.getsignal(signal.SIGTERM)

    def terminated(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminated)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        signal.signal(signal.SIGTERM, previous)


def run_check(
    argv: Sequence[str],
    tree: Path,
    delivery: str,
    *,
    timeout_s: float,
    extra: Sequence[str] = (),
) -> Outcome:
    """Copy ``tree``, run ``argv`` (+ ``extra``) in the copy, return what happened.

    ``observed`` is the source digest of the copy the check ran in, taken from
    the bytes written into it (excluded folders such as ``.git/`` are not copied).

    Raises ``FileNotFoundError`` when the program does not exist and
    ``subprocess.TimeoutExpired`` at the deadline (the check is killed first).
    """
    with scratch(delivery) as folder:
        copy = folder / "candidate"
        observed, _ = copy_source(tree, copy)
        env = candidate_env(copy)
        counts = folder / "counts.json"
        pytest_like = is_pytest(argv)
        if pytest_like:
            plugins = folder / "plugins"
            plugins.mkdir()
            module = f"{PLUGIN}_{secrets.token_hex(8)}"
            shutil.copyfile(Path(__file__).with_name("_pytest_counts.py"), plugins / f"{module}.py")
            env["PYTHONPATH"] = os.fspath(plugins) + os.pathsep + env["PYTHONPATH"]
            env["PYTEST_ADDOPTS"] = (env.get("PYTEST_ADDOPTS", "") + f" -p {module}").strip()
            env["EXECSYS_TEST_COUNTS"] = os.fspath(counts)
        started = time.monotonic()
        process = subprocess.Popen(
            [*argv, *extra],
            cwd=copy,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            output, _ = process.communicate(timeout=timeout_s)
        except BaseException:
            process.kill()
            process.wait()
            raise
        duration = time.monotonic() - started
        tests = None
        if pytest_like and counts.is_file():
            with contextlib.suppress(ValueError, OSError):
                tests = json.loads(counts.read_text())
        return Outcome(process.returncode, output, duration, observed, tests)


def output_digest(output: bytes) -> str:
    """The evidence's digest of a check's output."""
    return "sha256:" + hashlib.sha256(output).hexdigest()
