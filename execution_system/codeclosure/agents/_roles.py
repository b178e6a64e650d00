"""The runtime roles: discovery, planner, freeze, check, and the patch worker."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contracts import digest_of
from execution_system.codeclosure._source import (
    digest_entries,
    protected_digests,
    source_digest,
    source_files,
    stable_digest,
)
from execution_system.codeclosure.agents._agent import agent
from execution_system.codeclosure.agents._checkrun import is_pytest, output_digest, run_check
from execution_system.codeclosure.agents._shadow import shadowing, top_modules

Role = Callable[[dict[str, Any], list[str]], dict[str, Any]]
OBSERVATION_WINDOW_S = 0.2
CHECK_TIMEOUT_S = 900.0


def _done(**output: Any) -> dict[str, Any]:
    return {"status": "completed", "output": output}


def discovery(request: dict[str, Any], args: list[str]) -> dict[str, Any]:
    """Record the base identity of the project, what it contains, and what its tests select.

    ``baseline`` holds, per pytest check, the counts of a collection-only run on
    the base: a candidate's check may not select fewer tests than that.
    """
    entries = source_files(Path.cwd())
    digest, files = digest_entries(entries), len(entries)
    # What the candidate's identity covers (excluded folders such as .git/ are not part of it).
    tops = sorted({p.split("/", 1)[0] for p in entries})
    baseline: dict[str, Any] = {}
    for name, argv in (request["input"].get("checks") or {}).items():
        if not is_pytest(argv):
            continue
        try:
            ran = run_check(
                argv,
                Path.cwd(),
                request["delivery"],
                timeout_s=CHECK_TIMEOUT_S,
                extra=("--collect-only", "-q"),
            )
        except (OSError, subprocess.TimeoutExpired):
            baseline[name] = None
            continue
        baseline[name] = ran.tests
    return _done(
        facts={
            "base": digest,
            "files": files,
            "top_level": tops[:50],
            "objective": request["input"]["objective"],
            "baseline": baseline,
            "modules": top_modules(Path.cwd()),
        }
    )


def planner(request: dict[str, Any], args: list[str]) -> dict[str, Any]:
    """Plan: every check is an obligation; the criteria become the plan's checklist."""
    data = request["input"]
    lines = [f"Objective: {data['objective']}"]
    lines += [f"- criterion: {c}" for c in data["criteria"]]
    lines += [
        f"- verify with: {name}" + (" (required)" if name in data["required"] else "")
        for name in data["checks"]
    ]
    return _done(obligations=[f"check_{name}" for name in data["checks"]], plan="\n".join(lines))


def freeze(request: dict[str, Any], args: list[str]) -> dict[str, Any]:
    """Compute the candidate digest, and again after an observation window; it must not move.

    The second look re-reads only the files whose stat rows moved (or were
    too recent to trust), see :func:`stable_digest`. Also records the content
    digest of every protected file, which the acceptance manifest binds.
    """
    first, files = stable_digest(Path.cwd(), OBSERVATION_WINDOW_S)
    if first is None:
        return {"status": "failed", "reason": "source-changed-during-freeze"}
    patterns = tuple((request.get("input") or {}).get("protected") or ())
    return _done(frozen=first, files=files, protected=protected_digests(Path.cwd(), patterns))


def check(request: dict[str, Any], args: list[str]) -> dict[str, Any]:
    """Run one check against a scratch copy of the frozen candidate; bind the evidence."""
    name = args[0]
    data = request["input"]
    argv = list(data["checks"][name])
    spec = digest_of({"check": name, "argv": argv})
    facts = data.get("facts") or {}
    shadows = shadowing(argv, Path.cwd(), facts.get("modules"))
    if shadows:
        return _done(
            evidence={
                "check": name,
                "exit_status": -1,
                "output_digest": output_digest(b""),
                "duration_s": 0.0,
                "frozen": source_digest(Path.cwd())[0],
                "spec": spec,
                "tail": "not run: the candidate adds " + ", ".join(shadows),
                "tests": None,
                "base_tests": (facts.get("baseline") or {}).get(name),
                "shadows": shadows,
            }
        )
    try:
        ran = run_check(argv, Path.cwd(), request["delivery"], timeout_s=CHECK_TIMEOUT_S)
    except FileNotFoundError:
        return {"status": "failed", "reason": "check-cannot-start"}
    except subprocess.TimeoutExpired:
        return {"status": "failed", "reason": "check-timed-out", "retryable": True}
    tail = (ran.output.decode("utf-8", "replace").strip().splitlines() or [""])[-1][:200]
    baseline = ((data.get("facts") or {}).get("baseline") or {}).get(name)
    return _done(
        evidence={
            "check": name,
            "exit_status": ran.exit_status,
            "output_digest": output_digest(ran.output),
            "duration_s": round(ran.duration_s, 3),
            "frozen": ran.observed,
            "spec": spec,
            "tail": tail,
            "tests": ran.tests,
            "base_tests": baseline,
        }
    )


def patch(request: dict[str, Any], args: list[str]) -> dict[str, Any]:
    """Apply generation N's patch (the Nth file; the last repeats) to the candidate."""
    worker = request["input"]["worker"]
    if worker.get("ask") and request["turn"] == 1:
        return {
            "status": "needs-input",
            "question": worker["ask"],
            "session": f"patch-{request['invocation']}",
        }
    patches = worker["patches"]
    chosen = patches[min(request["activation"], len(patches)) - 1]
    done = subprocess.run(
        ["patch", "-p1", "--batch", "--forward", "--silent", "-i", chosen],
        capture_output=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        return {"status": "failed", "reason": "patch-does-not-apply"}
    for leftover in Path.cwd().rglob("*.orig"):
        leftover.unlink()
    note = f" (answer: {request['response']})" if request.get("response") is not None else ""
    return _done(
        summary=f"applied {Path(chosen).name} for generation {request['activation']}{note}"
    )


ROLES: dict[str, Role] = {
    "discovery": discovery,
    "planner": planner,
    "freeze": freeze,
    "check": check,
    "patch": patch,
    "agent": agent,
}
