"""Run ``execsys`` as a real process against the triage example in a temp store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "triage"
EXECSYS = str(Path(sys.executable).with_name("execsys"))


def execsys(tmp: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EXECSYS_STORE": f"sqlite:///{tmp}/state.db"}
    env.pop("EXECSYS_DEBUG", None)
    return subprocess.run(
        [EXECSYS, *args],
        env=env,
        cwd=tmp,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def triage_delivery(tmp: Path) -> str:
    """Run the triage example to completion (one approval by alice); return its id."""
    started = execsys(
        tmp,
        "run",
        str(EXAMPLE / "spec.yaml"),
        "--input",
        str(EXAMPLE / "input.yaml"),
        "--authority",
        str(EXAMPLE / "authority.yaml"),
        "--json",
    )
    assert started.returncode == 0, started.stderr
    delivery = str(json.loads(started.stdout)["delivery"])
    (tmp / "approve.json").write_text('{"approved": true}')
    done = execsys(
        tmp,
        "resolve",
        delivery,
        "--node",
        "signoff",
        "--actor",
        "alice",
        "--role",
        "maintainer",
        "--result",
        str(tmp / "approve.json"),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"
    return delivery
