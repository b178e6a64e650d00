"""Bad input through the real CLI: one line, its code, nothing half-created (issue item 10)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from contracts import ErrorCode, exit_status
from execution_system.codeclosure import GoalRuntime
from tests.codeclosure.helpers import (
    CALC,
    SOURCE,
    create,
    events,
    execsys,
    snapshot,
    workspace,
)


def _create(sample, *extra: str, criterion=True, project=None, as_json=False):
    args = [
        "goal",
        "create",
        "--objective",
        "add() returns the sum",
        "--project",
        project or str(sample.project),
        "--check",
        f"tests={sys.executable} tests/check_calc.py",
        *extra,
    ]
    if criterion:
        args += ["--criterion", "tests/check_calc.py passes"]
    if "--patch" not in extra:
        args += ["--patch", sample.patches["direct"]]
    if as_json:
        args.append("--json")
    return execsys(*args, store=sample.store)


def _goals(sample) -> list[dict]:
    done = execsys("goal", "status", "--json", store=sample.store)
    assert done.returncode == 0, done.stderr
    # The first JSON document (see test_status_listing_is_one_json_document).
    document, _ = json.JSONDecoder().raw_decode(done.stdout)
    return document["goals"]


CASES = {
    "no-criterion": (ErrorCode.GOAL_INVALID, {"criterion": False}, []),
    "blank-criterion": (ErrorCode.GOAL_INVALID, {"criterion": False}, ["--criterion", "  "]),
    "missing-project": (ErrorCode.GOAL_INVALID, {"project": "/nonexistent/execsys-project"}, []),
    "check-cannot-start": (
        ErrorCode.CHECK_CANNOT_START,
        {},
        ["--check", "lint=execsys-no-such-program --strict"],
    ),
    "unknown-required": (ErrorCode.GOAL_INVALID, {}, ["--required", "nope"]),
    "missing-patch": (ErrorCode.GOAL_INVALID, {}, ["--patch", "/nonexistent/fix.patch"]),
    "bad-check-syntax": (ErrorCode.GOAL_INVALID, {}, ["--check", "no equals sign"]),
    "empty-objective": (ErrorCode.GOAL_INVALID, {}, ["--objective="]),
    "zero-generations": (ErrorCode.GOAL_INVALID, {}, ["--max-generations", "0"]),
    "unknown-unprotect": (ErrorCode.GOAL_INVALID, {}, ["--unprotect", "src"]),
    "exclude-a-path": (ErrorCode.GOAL_INVALID, {}, ["--exclude", "data/raw"]),
    "exclude-dot-dot": (ErrorCode.GOAL_INVALID, {}, ["--exclude", ".."]),
    "unknown-allow-fewer": (ErrorCode.GOAL_INVALID, {}, ["--allow-fewer-tests", "lint"]),
    "python-not-a-file": (ErrorCode.CHECK_CANNOT_START, {}, ["--python", "/nonexistent/python"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_with_its_code_and_creates_nothing(sample, case):
    code, kw, extra = CASES[case]
    done = _create(sample, *extra, **kw)
    assert done.returncode == exit_status(code)
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"execsys: {code.value}")
    # Nothing created: no store at all (a refused create makes none), or one without goals.
    store = Path(sample.store.removeprefix("sqlite:///"))
    assert not store.exists() or _goals(sample) == []


def test_good_input_creates_exactly_one_ready_goal(sample):
    # The control for the cases above: the same command line without the defect.
    done = _create(sample, as_json=True)
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert (view["version"], view["run_status"]) == (1, "READY")
    assert [g["goal"] for g in _goals(sample)] == [view["goal"]]


def test_status_listing_is_one_json_document(sample):
    assert _create(sample).returncode == 0
    done = execsys("goal", "status", "--json", store=sample.store)
    assert done.returncode == 0
    assert len(json.loads(done.stdout)["goals"]) == 1


def test_a_failed_goal_goes_on_as_a_new_goal_with_its_settings_and_a_fixed_patch(
    runtime, sample, aio
):
    failed = create(runtime, sample, sample.worker("broken"), max_generations=2)
    assert aio(runtime.start(failed["goal"], 1))["run_status"] == "FAILED"
    view = runtime.view(failed["goal"])
    assert f"execsys goal create --from {failed['goal']}" in view["next"]
    runtime.close()
    carry_on = ("goal", "create", "--from", failed["goal"], "--patch", sample.patches["direct"])
    done = execsys(*carry_on, "--json", store=sample.store)
    assert done.returncode == 0, done.stderr
    fresh = json.loads(done.stdout)
    assert fresh["run_status"] == "READY" and fresh["objective"] == view["objective"]
    assert fresh["notes"] == [f"created from {failed['goal']} (FAILED: {view['detail']})"]
    reader = GoalRuntime(sample.store)
    try:
        old, new = (reader.goals.get(g)["goal"] for g in (failed["goal"], fresh["goal"]))
        assert (new.checks, new.criteria, new.protected, new.max_generations) == (
            old.checks,
            old.criteria,
            old.protected,
            2,
        )
        assert new.worker.patches == (sample.patches["direct"],)
    finally:
        reader.close()
    started = execsys(
        "goal", "start", fresh["goal"], "--expected-version", "1", "--json", store=sample.store
    )
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["run_status"] == "CLOSED"
    neither = execsys("goal", "create", "--patch", sample.patches["direct"], store=sample.store)
    assert neither.returncode == 2
    assert neither.stderr.startswith("execsys: USAGE at goal create: a new goal needs --objective")
    elsewhere = sample.root / "elsewhere.db"
    mistyped = execsys(*carry_on, store=f"sqlite:///{elsewhere}")
    assert mistyped.stderr.startswith("execsys: STORE_NOT_FOUND"), mistyped.stderr
    assert not elsewhere.exists(), "--from reads a goal: it never creates a store"


def test_a_patch_that_does_not_apply_fails_the_goal_and_restores_the_workspace(
    runtime, sample, aio
):
    created = create(runtime, sample, sample.worker("broken"))
    done = execsys(
        "goal", "start", created["goal"], "--expected-version", "1", "--json", store=sample.store
    )
    # A goal that ends FAILED is a failed command: exit 1, the reason on stderr.
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"execsys: GOAL_FAILED at {created['goal']}: the goal ended FAILED")
    assert "PROTOCOL_ERROR (NODE_FAILED): patch-does-not-apply" in line, "the executor's reason"
    view = json.loads(done.stdout)
    assert view["run_status"] == "FAILED"
    assert view["phase"] == "IMPLEMENT"
    assert view["detail"] == "PROTOCOL_ERROR (NODE_FAILED): patch-does-not-apply"
    assert view["version"] == 2
    reader = GoalRuntime(sample.store)
    try:
        [failed] = [
            e for e in events(reader.host, view["delivery"]) if e["transition"] == "work-failed"
        ]
        assert failed["node"] == "IMPLEMENT"
        assert failed["error"]["code"] == "NODE_FAILED"
        assert "patch-does-not-apply" in failed["error"]["message"]
        (shown,) = [e for e in reader.audit(created["goal"])["journal"] if e["error"]]
        assert (shown["error"], shown["reason"]) == ("NODE_FAILED", "patch-does-not-apply")
        custody = reader.host.inspect(view["delivery"]).custody.to_json()
    finally:
        reader.close()
    # The half-applied first file was rolled back: the head is the pre-IMPLEMENT savepoint.
    assert custody["head"] == custody["savepoint"]
    candidate = workspace(sample, view["delivery"])
    assert (candidate / CALC).read_text() == SOURCE
    assert snapshot(candidate) == snapshot(sample.project)
    assert not list(candidate.rglob("*.rej")) and not list(candidate.rglob("*.orig"))
