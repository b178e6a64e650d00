"""The generic coding-agent adapter: any CLI agent as the IMPLEMENT worker.

The agent does not speak the executor protocol; this role does for it. Per
turn it writes a prompt file (objective, plan, criteria, protected paths and,
on a repair, the failing evidence), runs the agent's command line with
``{prompt_file}`` replaced, in the candidate workspace, and then enumerates
the change set itself (the agent's own account is never trusted). An agent
that wants to ask writes its question to the file named by
``EXECSYS_QUESTION_FILE`` (outside the workspace) and exits 0: that becomes an
action-input suspension, and the next turn's prompt carries the answer. A
question must come before any change: custody attributes every write to the
turn whose capability allowed it, and a suspended turn commits no files, so an
agent that both changed files and asked fails the turn
(``agent-asked-after-changing``, its changes rolled back) instead of losing
either the question or the changes silently.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from execution_system.codeclosure._source import source_files

PLACEHOLDER = "{prompt_file}"
_TAIL = 2000


def prompt_text(data: dict[str, Any], response: Any) -> str:
    """The prompt: what to do, what must hold, what may not be touched, what failed."""
    lines = [
        "# Task",
        "",
        str(data["objective"]),
        "",
        "## Acceptance criteria",
        "",
        *[f"- {criterion}" for criterion in data.get("criteria") or []],
        "",
        "## Plan",
        "",
        str(data.get("plan") or ""),
        "",
        "## Rules",
        "",
        "- Work in the current directory; it is a copy of the project, not the project.",
        "- Do not change these protected paths (a change to them is refused):",
        *[f"  - {path}" for path in data.get("protected") or []],
        "- To ask a question instead of changing code, write it to the file named by",
        "  the EXECSYS_QUESTION_FILE environment variable and exit 0.",
    ]
    if data.get("feedback"):
        lines += ["", "## The previous attempt was rejected", "", str(data["feedback"])]
    if response is not None:
        lines += ["", "## Answer to your question", "", json.dumps(response)]
    return "\n".join(lines) + "\n"


def agent(request: dict[str, Any], args: list[str]) -> dict[str, Any]:
    """Run the agent once; report its question, its failure, or the files it changed."""
    data = request["input"]
    worker = data["worker"]
    root = Path.cwd()
    before = source_files(root)
    with tempfile.TemporaryDirectory(prefix="execsys-agent-") as scratch:
        prompt = Path(scratch) / "prompt.md"
        prompt.write_text(prompt_text(data, request.get("response")), encoding="utf-8")
        question = Path(scratch) / "question.txt"
        argv = [word.replace(PLACEHOLDER, str(prompt)) for word in worker["argv"]]
        env = {**os.environ, "EXECSYS_PROMPT_FILE": str(prompt)}
        env["EXECSYS_QUESTION_FILE"] = str(question)
        try:
            process = subprocess.Popen(
                argv,
                cwd=root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        except OSError:
            return {"status": "failed", "reason": "agent-cannot-start"}
        try:
            output, _ = process.communicate(timeout=float(worker.get("timeout_s", 1800.0)))
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait()
            return {"status": "failed", "reason": "agent-timed-out", "retryable": True}
        asked = question.read_text(encoding="utf-8").strip() if question.is_file() else ""
    if process.returncode != 0:
        last = (output.decode("utf-8", "replace").strip().splitlines() or [""])[-1][:200]
        reason = f"agent-exited-{process.returncode}" + (f": {last}" if last else "")
        return {"status": "failed", "reason": reason}
    after = source_files(root)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    if asked and changed:
        listed = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
        return {
            "status": "failed",
            "reason": f"agent-asked-after-changing {len(changed)} file(s) ({listed}): "
            "ask before changing anything",
        }
    if asked:
        return {
            "status": "needs-input",
            "question": asked,
            "session": f"agent-{request['invocation']}",
        }
    tail = output.decode("utf-8", "replace").strip()[-_TAIL:]
    listed = ", ".join(changed[:20]) + (" ..." if len(changed) > 20 else "")
    summary = f"the agent changed {len(changed)} file(s): {listed or 'none'}"
    return {"status": "completed", "output": {"summary": summary + (f"\n{tail}" if tail else "")}}
