"""The generic agent adapter: a CLI agent that knows nothing of the executor protocol.

The agent is ``examples/agents/scripted_editor.py``: it reads the prompt file,
edits files by its script, or writes a question to ``$EXECSYS_QUESTION_FILE``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from execution_system.codeclosure import AgentWorker
from tests.codeclosure.helpers import CALC, CHECK_PATH, create, decisions, failures

EDITOR = Path(__file__).resolve().parents[2] / "examples" / "agents" / "scripted_editor.py"


def _agent(tmp_path: Path, steps: list[dict[str, Any]]) -> AgentWorker:
    script = tmp_path / "agent-script.json"
    script.write_text(json.dumps(steps))
    return AgentWorker(argv=(sys.executable, str(EDITOR), str(script), "{prompt_file}"))


def test_an_agent_fixes_the_code_after_a_rejection(runtime, sample, aio, tmp_path):
    worker = _agent(
        tmp_path,
        [
            {"replace": [[CALC, "a - b", "a * b"]]},
            {"replace": [[CALC, "a * b", "a + b"]]},
        ],
    )
    created = create(runtime, sample, worker)
    view = aio(runtime.start(created["goal"], 1))
    assert view["run_status"] == "CLOSED", view["detail"]
    assert decisions(runtime, created["goal"]) == ["REJECT_REPAIRABLE", "ACCEPT"]
    # The runtime, not the agent, says what changed.
    report = runtime.audit(created["goal"])
    assert report["generation"] == 2


def test_an_agent_question_is_an_action_input(runtime, sample, aio, tmp_path):
    worker = _agent(tmp_path, [{"ask": "Keep add(a, b)?", "replace": [[CALC, "a - b", "a + b"]]}])
    created = create(runtime, sample, worker)
    view = aio(runtime.start(created["goal"], 1))
    assert view["run_status"] == "WAITING_FOR_INPUT"
    assert view["question"]["question"] == "Keep add(a, b)?"
    aio(runtime.host.answer(view["delivery"], view["question"]["correlation"], {"keep": True}))
    after = runtime.view(created["goal"])
    assert after["run_status"] == "CLOSED", after["detail"]


def test_an_agent_that_edits_a_protected_path_is_refused(runtime, sample, aio, tmp_path):
    worker = _agent(tmp_path, [{"replace": [[CHECK_PATH, "== 5", "!= 0"]]}])
    created = create(runtime, sample, worker)
    view = aio(runtime.start(created["goal"], 1))
    assert view["run_status"] == "FAILED"
    assert failures(runtime.host, view["delivery"]) == [("IMPLEMENT", "CUSTODY_PROTECTED_PATH")]
