"""Running ``execsys`` the way a user does, on files a hostile user writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXECSYS = str(Path(sys.executable).with_name("execsys"))
#: No hostile input may hold a command longer than this (a hang fails the test).
BOUND_S = 60.0

AGENT = """\
import json, sys
request = json.load(sys.stdin)
reply = json.loads(REPLY)
if reply == "echo":
    reply = {"status": "completed", "output": {"text": request["input"].get("text", "")}}
print(json.dumps(reply))
"""


@dataclass
class Result:
    """What one ``execsys`` process did."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    @property
    def line(self) -> str:
        """The one line on stderr (asserting it is exactly one)."""
        lines = self.err.splitlines()
        assert len(lines) == 1, self.err
        assert lines[0].startswith("execsys: "), self.err
        return lines[0]


def execsys(
    *args: str, cwd: Path, stdin: str | None = None, env: dict[str, str] | None = None
) -> Result:
    """Run ``execsys ARGS`` in ``cwd``; fail the test if it outlives :data:`BOUND_S`."""
    full_env = {k: v for k, v in os.environ.items() if k != "EXECSYS_STORE"}
    full_env.update(env or {})
    done = subprocess.run(
        [EXECSYS, *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=BOUND_S,
        env=full_env,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return Result(done.returncode, done.stdout, done.stderr)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def one_action(
    folder: Path,
    *,
    outputs: str = "{text: {type: string}}",
    input_schema: str = "{type: object, properties: {text: {type: string}}}",
    reply: Any = "echo",
) -> Path:
    """A spec ``a -> done`` whose action ``a`` replies ``reply`` (or echoes its input)."""
    # The reply is written into the script: argv cannot carry a NUL byte.
    (folder / "agent.py").write_text(f"REPLY = {json.dumps(reply)!r}\n" + AGENT)
    command = json.dumps(["python3", "agent.py"])
    write(folder, "execsys.yaml", f"executors:\n  ag: {{command: {command}, timeout_s: 30}}\n")
    return write(
        folder,
        "spec.yaml",
        f"""\
        spec: execution-system/v1
        graph: hostile
        input: {input_schema}
        start: a
        nodes:
          a:
            kind: action
            executor: ag
            inputs: {{text: "input.text?"}}
            outputs: {outputs}
            next: done
          done: {{kind: terminal, outcome: succeeded}}
        """,
    )
