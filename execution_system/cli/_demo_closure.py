"""The CodeClosure demo: a failing test, a wrong first fix, a right repair, a closeout.

Scenario 1: a sample project whose test fails; generation 1's patch does not
fix it (REJECT_REPAIRABLE), generation 2's does (ACCEPT -> CLOSEOUT); the
journal is verified. Scenario 2: the worker asks a question first, answered
through ``execsys input`` by a separate process, then closes the goal.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

from execution_system.cli._output import emit

SOURCE = "def add(a, b):\n    return a - b\n"
TEST = (
    "import pathlib, sys\n"
    "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'src'))\n"
    "from calc import add\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n"
)
WRONG = (
    "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
    "-    return a - b\n+    return a * b\n"
)
RIGHT = (
    "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
    "-    return a * b\n+    return a + b\n"
)
DIRECT = (
    "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
    "-    return a - b\n+    return a + b\n"
)


def _rule(title: str) -> None:
    emit("")
    emit(f"== {title} " + "=" * max(0, 74 - len(title)))


def _workspace(store: str | None) -> Path:
    from execution_system._compose import data_dir, factory_config

    folder = data_dir(factory_config(store)) / "demo" / time.strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)
    project = folder / "project"
    (project / "src").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "src" / "calc.py").write_text(SOURCE)
    (project / "tests" / "test_calc.py").write_text(TEST)
    for name, text in (("wrong.patch", WRONG), ("right.patch", RIGHT), ("direct.patch", DIRECT)):
        (folder / name).write_text(text)
    return folder


def _show(view: dict[str, Any]) -> None:
    emit(
        f"phase {view['phase']}, run status {view['run_status']} ({view['detail']}), "
        f"generation {view['generation']}"
    )
    for candidate in view.get("candidates", []):
        frozen = candidate.get("frozen") or "-"
        emit(
            f"  candidate generation {candidate['generation']}: {candidate['state']:<9} "
            f"frozen {frozen[:23]}...  decision {candidate.get('decision')}"
        )


async def run_closure_demo(store: str | None) -> int:
    """Both scenarios; 0 when both goals closed and the journals verify."""
    from execution_system.codeclosure import GoalRuntime, PatchWorker
    from host.journal import verify_lines

    folder = _workspace(store)
    check: dict[str, tuple[str, ...]] = {
        "tests": (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    }
    emit("CodeClosure demo: a code change carried from goal to evidence-backed closeout.")
    emit(f"sample project: {folder / 'project'} (src/calc.py; tests/test_calc.py fails)")
    runtime = GoalRuntime(store)
    try:
        _rule("Scenario 1: a wrong fix, then a repair")
        created = runtime.create(
            objective="add() returns the sum of its arguments",
            project=str(folder / "project"),
            criteria=["tests/test_calc.py passes"],
            checks=check,
            worker=PatchWorker(patches=(str(folder / "wrong.patch"), str(folder / "right.patch"))),
        )
        goal = created["goal"]
        emit(
            f"goal {goal} created (version {created['version']}); tests/, conftest.py and "
            "the test configuration are protected: the worker cannot make the check pass "
            "by editing them"
        )
        started = time.monotonic()
        view = await runtime.start(goal, created["version"])
        elapsed = time.monotonic() - started
        report = runtime.audit(goal)
        for item in report["evidence"]:
            emit(
                f"evidence  {item['check']}: exit {item['exit_status']} "
                f"({item['tail'] or 'no output'}), bound to {item['frozen'][:23]}..."
            )
        for item in report["decisions"]:
            emit(
                f"decision  generation {item.get('generation')}: {item['decision']} - "
                f"{item.get('feedback', '')}"
            )
        _show(view)
        verdict = verify_lines(runtime.host.journal_lines(view["delivery"]))
        emit(f"journal   {verdict.events} events verified, head {verdict.head}")
        emit(f"time      {elapsed:.1f} s (see bench/closure_bench.py for the overhead split)")
        first_ok = view["run_status"] == "CLOSED" and verdict.ok

        _rule("Scenario 2: the worker asks a question first")
        created = runtime.create(
            objective="add() returns the sum of its arguments",
            project=str(folder / "project"),
            criteria=["tests/test_calc.py passes"],
            checks=check,
            worker=PatchWorker(
                patches=(str(folder / "direct.patch"),), ask="Keep the signature add(a, b)?"
            ),
        )
        view = await runtime.start(created["goal"], created["version"])
        question = view["question"]
        emit(f"{view['run_status']}: the worker asks {question['question']!r}")
        answer = folder / "answer.json"
        answer.write_text('"yes, keep it"')
        command = [
            str(Path(sys.executable).with_name("execsys")),
            "input",
            view["delivery"],
            "--correlation",
            question["correlation"],
            "--response",
            str(answer),
        ]
        if store:
            command += ["--store", store]
        emit(
            "answering through: execsys input DELIVERY --correlation "
            f"{question['correlation'][:10]}... --response answer.json"
        )
        # A separate process, as the agent's operator would run it.
        process = await asyncio.create_subprocess_exec(
            *command,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(os.environ),
        )
        out, err = await process.communicate()
        text = out.decode().strip().splitlines()
        emit(f"  -> {text[0] if text else err.decode().strip()}")
        view = runtime.view(created["goal"])
        _show(view)
        second_ok = view["run_status"] == "CLOSED"
    finally:
        runtime.close()
    _rule("Result")
    emit(
        "both goals closed with a current ACCEPT"
        if first_ok and second_ok
        else "a goal did not close: see 'execsys goal audit GOAL'"
    )
    emit("Look closer: .venv/bin/execsys goal status; .venv/bin/execsys goal audit GOAL")
    return 0 if first_ok and second_ok else 1
