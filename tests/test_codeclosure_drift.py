"""A source change after freeze invalidates the generation and its evidence, and fails."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from execution_system.codeclosure import GoalRuntime, PatchWorker

SOURCE = "def add(a, b):\n    return a + b\n"
PATCH = (
    "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
    "-    return a + b\n+    return b + a\n"
)
# A check that tampers with the frozen candidate itself (not its scratch copy).
TAMPER = (
    "import os, pathlib; "
    "p = pathlib.Path(os.environ['EXECSYS_WORKSPACE']) / 'src' / 'calc.py'; "
    "p.write_text(p.read_text() + '# changed after freeze\\n')"
)


def test_a_source_change_after_freeze_invalidates_the_generation(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "calc.py").write_text(SOURCE)
    (tmp_path / "g1.patch").write_text(PATCH)
    runtime = GoalRuntime(f"sqlite:///{tmp_path}/state.db")
    try:
        created = runtime.create(
            objective="commute",
            project=str(project),
            criteria=["still adds"],
            checks={"tamper": (sys.executable, "-c", TAMPER)},
            protected=[],
            worker=PatchWorker(patches=(str(tmp_path / "g1.patch"),)),
        )
        view = asyncio.run(runtime.start(created["goal"], created["version"]))
        assert view["run_status"] == "FAILED"
        assert view["candidates"][-1]["state"] == "INVALIDATED"
        lines = runtime.host.journal_lines(view["delivery"])
        events = [json.loads(line) for line in lines[1:]]
        invalidated = {e["node"] for e in events if e["transition"] == "work-invalidated"}
        assert {"SOURCE_FREEZE", "EVIDENCE_BUILD", "check_tamper"} <= invalidated
        assert not any(e["node"] == "CLOSEOUT" for e in events)
        assert (project / "src" / "calc.py").read_text() == SOURCE, "the project is untouched"
    finally:
        runtime.close()
