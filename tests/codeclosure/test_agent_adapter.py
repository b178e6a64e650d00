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
from tests.codeclosure.helpers import CALC, CHECK_PATH, create, decisions, events, failures

EDITOR = Path(__file__).resolve().parents[2] / "examples" / "agents" / "scripted_editor.py"
WRAPPER = EDITOR.with_name("cli_agent.sh")
STDIN_AGENT = """\
import pathlib, sys
task = sys.stdin.read()
assert task.startswith("# Task") and "add() returns the sum" in task, task[:200]
calc = pathlib.Path("src/calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b", 1))
print("fixed add")
"""


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
    summaries = [
        runtime.host.record(ref["digest"])["summary"]
        for e in events(runtime.host, report["delivery"])
        if e["node"] == "IMPLEMENT" and e["transition"] == "work-completed"
        for ref in e["refs"]
        if ref["kind"] == "output"
    ]
    assert [s.splitlines()[0] for s in summaries] == [
        f"the agent changed 1 file(s): {CALC}",
        f"the agent changed 1 file(s): {CALC}",
    ]
    # The repair's prompt carries the rejection and the failing check's evidence.
    first, second = ((tmp_path / f"agent-script.prompt-{k}").read_text() for k in (1, 2))
    assert "rejected" not in first
    assert "## The previous attempt was rejected" in second
    assert "required checks failed: tests:" in second


def test_an_agent_that_changes_files_and_then_asks_fails_the_turn_and_keeps_nothing(
    runtime, sample, aio, tmp_path
):
    worker = _agent(
        tmp_path,
        [{"ask": "Also rename sub?", "edit_first": True, "replace": [[CALC, "a - b", "a + b"]]}],
    )
    created = create(runtime, sample, worker)
    view = aio(runtime.start(created["goal"], 1))
    assert view["run_status"] == "FAILED", view["detail"]
    assert view["detail"] == (
        "PROTOCOL_ERROR (NODE_FAILED): agent-asked-after-changing 1 file(s) "
        f"({CALC}): ask before changing anything"
    )
    custody = runtime.host.inspect(view["delivery"]).custody.to_json()
    assert custody["head"] == custody["savepoint"], "its change was rolled back"


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


def test_the_cli_agent_wrapper_runs_the_configured_agent_with_the_prompt(
    runtime, sample, aio, tmp_path, monkeypatch
):
    agent = tmp_path / "stdin_agent.py"
    agent.write_text(STDIN_AGENT)
    monkeypatch.setenv("EXECSYS_AGENT", f"{sys.executable} {agent}")
    created = create(runtime, sample, AgentWorker(argv=(str(WRAPPER), "{prompt_file}")))
    view = aio(runtime.start(created["goal"], 1))
    assert view["run_status"] == "CLOSED", view["detail"]


def test_the_cli_agent_wrapper_without_an_agent_fails_the_turn_saying_so(
    runtime, sample, aio, monkeypatch
):
    monkeypatch.delenv("EXECSYS_AGENT", raising=False)
    created = create(runtime, sample, AgentWorker(argv=(str(WRAPPER), "{prompt_file}")))
    view = aio(runtime.start(created["goal"], 1))
    assert view["run_status"] == "FAILED"
    assert view["detail"].endswith(
        "agent-exited-64: cli_agent.sh: set EXECSYS_AGENT to your agent's non-interactive "
        "command line"
    )
