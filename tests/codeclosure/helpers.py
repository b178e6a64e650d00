"""Helpers for the CodeClosure tests: the sample project, patches and journal readers.

The project is ``src/calc.py`` (``add`` subtracts) and ``tests/check_calc.py``
(a plain script, exit 0 when ``add(2, 3) == 5``): checks are one Python
process, not pytest, so a whole goal run stays around two seconds.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from contracts import AuthorityPolicy, ExecsysError
from execution_system.codeclosure import Goal, GoalRuntime, PatchWorker

SOURCE = "def add(a, b):\n    return a - b\n"
CHECK = (
    "import pathlib, sys\n"
    "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'src'))\n"
    "from calc import add\n"
    "sys.exit(0 if add(2, 3) == 5 else 1)\n"
)
OTHER = "x = 1\n"
CALC = "src/calc.py"
CHECK_PATH = "tests/check_calc.py"

ACTOR = "alice"
POLICY = AuthorityPolicy(actors={ACTOR: ("maintainer",), "bob": ("developer",)}, approver=ACTOR)
"""alice may decide (maintainer); bob is known but may not."""

EXECSYS = str(Path(sys.executable).with_name("execsys"))


def _diff(path: str, before: str, after: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"
        )
    )


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``root``: relative path -> (mode, bytes)."""
    return {
        p.relative_to(root).as_posix(): (p.stat().st_mode, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@dataclass
class Sample:
    """The sample project, its patches and the store URL."""

    root: Path
    project: Path
    store: str
    patches: dict[str, str] = field(default_factory=dict)

    @property
    def checks(self) -> dict[str, tuple[str, ...]]:
        """One required check: the test script."""
        return {"tests": (sys.executable, CHECK_PATH)}

    def worker(self, *names: str, ask: str | None = None) -> PatchWorker:
        return PatchWorker(patches=tuple(self.patches[n] for n in names), ask=ask)


def make_sample(tmp_path: Path) -> Sample:
    """Write the sample project and the patches under ``tmp_path``."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / CALC).write_text(SOURCE)
    (project / "src" / "other.py").write_text(OTHER)
    (project / CHECK_PATH).write_text(CHECK)
    texts = {
        # generation 1's wrong fix, generation 2's repair on top of it
        "wrong": _diff(CALC, SOURCE, SOURCE.replace("a - b", "a * b")),
        "right": _diff(CALC, SOURCE.replace("a - b", "a * b"), SOURCE.replace("a - b", "a + b")),
        # a second wrong fix on top of the first (for REJECT_BLOCKED)
        "wrong2": _diff(CALC, SOURCE.replace("a - b", "a * b"), SOURCE.replace("a - b", "b - a")),
        "direct": _diff(CALC, SOURCE, SOURCE.replace("a - b", "a + b")),
        # makes the check pass by editing the protected test
        "cheat": _diff(
            CHECK_PATH, CHECK, CHECK.replace("sys.exit(0 if add(2, 3) == 5 else 1)", "sys.exit(0)")
        ),
        # the first file applies, the second does not: a half-applied patch
        "broken": _diff(CALC, SOURCE, SOURCE.replace("a - b", "a + b"))
        + _diff("src/other.py", "x = 2\n", "x = 3\n"),
    }
    patches = {}
    for name, text in texts.items():
        path = tmp_path / f"{name}.patch"
        path.write_text(text)
        patches[name] = str(path)
    return Sample(tmp_path, project, f"sqlite:///{tmp_path}/state.db", patches)


def create(runtime: GoalRuntime, sample: Sample, worker: Any, **kw: Any) -> dict[str, Any]:
    """Create a goal on the sample project (defaults: one required check)."""
    kw.setdefault("checks", sample.checks)
    return runtime.create(
        objective="add() returns the sum of its arguments",
        project=str(sample.project),
        criteria=["tests/check_calc.py passes"],
        worker=worker,
        **kw,
    )


def goal_of(sample: Sample, worker: Any, **kw: Any) -> Goal:
    """A Goal document built directly (for rendering and admitting its graph by hand)."""
    checks = kw.pop("checks", sample.checks)
    return Goal(
        id="g-0123456789ab",
        objective="add() returns the sum of its arguments",
        project=str(sample.project.resolve()),
        criteria=("tests/check_calc.py passes",),
        checks=checks,
        required=tuple(kw.pop("required", list(checks))),
        worker=worker,
        **kw,
    )


def events(host: Any, delivery: str) -> list[dict[str, Any]]:
    """The delivery's journal events (header dropped)."""
    return [json.loads(line) for line in host.journal_lines(delivery)[1:]]


def completed(host: Any, delivery: str) -> list[str]:
    """Nodes in the order their work completed."""
    return [e["node"] for e in events(host, delivery) if e["transition"] == "work-completed"]


def started(host: Any, delivery: str) -> set[str]:
    """Nodes that ever started work."""
    return {e["node"] for e in events(host, delivery) if e["transition"] == "work-started"}


def failures(host: Any, delivery: str) -> list[tuple[str, str]]:
    """(node, error code) of each work-failed event."""
    return [
        (e["node"], (e.get("error") or {}).get("code"))
        for e in events(host, delivery)
        if e["transition"] == "work-failed"
    ]


def decisions(runtime: GoalRuntime, goal: str) -> list[str]:
    """Every decision FINAL_VERIFY / REEVALUATE recorded, in order."""
    return [d["decision"] for d in runtime.audit(goal)["decisions"]]


def row(runtime: GoalRuntime, goal: str) -> dict[str, Any]:
    """The goal's listed record (version, state, delivery), through the public list."""
    return next(g for g in runtime.list() if g["goal"] == goal)


def execsys(*args: str, store: str) -> subprocess.CompletedProcess[str]:
    """Run the real CLI."""
    return subprocess.run(
        [EXECSYS, *args, "--store", store],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )


@contextmanager
def refused(code: str) -> Iterator[Any]:
    """Expect an ExecsysError with exactly ``code``."""
    with pytest.raises(ExecsysError) as info:
        yield info
    assert info.value.code == code, f"{info.value.code}: {info.value}"


def workspace(sample: Sample, delivery: str) -> Path:
    """The delivery's candidate workspace (custody lives beside the store)."""
    from execution_system.custody import FileCustody

    return Path(FileCustody(sample.root / "custody").workspace(delivery))
