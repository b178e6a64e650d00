"""A real-layout project (own venv, ``src/`` package, pytest, conftest.py, pyproject.toml).

Checks must test the candidate (not the stale installed copy in the project's
venv), protection covers test collection and configuration, and the evidence
records what ran.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts import digest_of
from execution_system.codeclosure import DEFAULT_PROTECTED, GoalRuntime, PatchWorker, manifest_of
from tests.codeclosure.helpers import EXECSYS, events, failures, refused, snapshot
from tests.codeclosure.realproject import CALC, RIGHT, RealProject, added, make_real_project


@pytest.fixture
def real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RealProject]:
    # The project's venv sees this run's site-packages; autoloading every plugin
    # installed there (hypothesis, ...) would triple each check's start-up time.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    made = make_real_project(tmp_path)
    before = snapshot(made.project)
    yield made
    assert snapshot(made.project) == before, "the project folder was modified"


@pytest.fixture
def goals(real: RealProject, aio: Any) -> Iterator[GoalRuntime]:
    made = GoalRuntime(real.store)
    yield made
    made.close()


def _create(goals: GoalRuntime, real: RealProject, *patches: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("python", real.python)
    return goals.create(
        objective="add() returns the sum",
        project=str(real.project),
        criteria=["tests/test_calc.py passes"],
        worker=PatchWorker(patches=tuple(real.patches[p] for p in patches)),
        **kw,
    )


def _output(goals: GoalRuntime, delivery: str, node: str) -> dict[str, Any]:
    event = next(
        e
        for e in reversed(events(goals.host, delivery))
        if e["node"] == node and e["transition"] == "work-completed"
    )
    ref = next(r for r in event["refs"] if r["kind"] == "output")
    value = goals.host.record(ref["digest"])
    assert isinstance(value, dict)
    return value


def test_the_default_check_runs_the_projects_python_against_the_candidate(goals, real, aio):
    created = _create(goals, real, "direct")
    goal = goals.goals.get(created["goal"])["goal"]
    assert goal.checks == {"tests": (real.python, "-m", "pytest", "-q", "-p", "no:cacheprovider")}
    view = aio(goals.start(created["goal"], 1))
    # The venv's installed mylib still subtracts: only the candidate's src/ can pass.
    assert view["run_status"] == "CLOSED", view["detail"]
    (evidence,) = goals.audit(created["goal"])["evidence"]
    assert evidence["tests"]["selected"] == 4
    assert evidence["tests"]["passed"] == 4
    assert evidence["base_tests"]["selected"] == 4


def test_a_wrong_fix_is_rejected_and_the_repair_accepted(goals, real, aio):
    created = _create(goals, real, "wrong", "right")
    view = aio(goals.start(created["goal"], 1))
    assert view["run_status"] == "CLOSED", view["detail"]
    report = goals.audit(created["goal"])
    assert [d["decision"] for d in report["decisions"]] == ["REJECT_REPAIRABLE", "ACCEPT"]
    first, second = report["evidence"]
    assert (first["tests"]["failed"], second["tests"]["failed"]) == (2, 0)


def test_a_conftest_that_deselects_the_failing_tests_is_refused(goals, real, aio):
    created = _create(goals, real, "gaming")
    assert "**/conftest.py" in goals.goals.get(created["goal"])["goal"].protected
    view = aio(goals.start(created["goal"], 1))
    assert view["run_status"] == "FAILED"
    assert failures(goals.host, view["delivery"]) == [("IMPLEMENT", "CUSTODY_PROTECTED_PATH")]
    assert goals.audit(created["goal"])["decisions"] == []


@pytest.mark.parametrize(("patch", "module"), [("shadow", "pytest"), ("hook", "sitecustomize")])
def test_a_module_that_would_stand_in_for_the_checks_own_is_not_a_pass(
    goals, real, aio, patch, module
):
    # pytest.py at the root would replace pytest (the candidate is first on the import
    # path) and report passes for tests it never ran; sitecustomize runs before anything.
    created = _create(goals, real, patch, max_generations=1)
    view = aio(goals.start(created["goal"], 1))
    assert view["run_status"] == "BLOCKED", view["detail"]
    (decision,) = goals.audit(created["goal"])["decisions"]
    assert decision["decision"] == "REJECT_BLOCKED"
    assert f"the candidate adds {module} at the top of the import path" in decision["feedback"]
    (evidence,) = goals.audit(created["goal"])["evidence"]
    assert (evidence["shadows"], evidence["exit_status"], evidence["tests"]) == ([module], -1, None)


def test_a_module_named_like_the_counting_plugin_does_not_replace_it(goals, real, aio):
    created = _create(goals, real, "counts", max_generations=1)
    view = aio(goals.start(created["goal"], 1))
    assert view["run_status"] == "BLOCKED", view["detail"]
    (evidence,) = goals.audit(created["goal"])["evidence"]
    assert (evidence["exit_status"], evidence["tests"]["failed"]) == (1, 2)


def test_fewer_tests_than_the_base_is_not_a_pass(goals, real, aio):
    # Even with conftest.py unprotected, the counts catch the deselection.
    protected = [p for p in DEFAULT_PROTECTED if p != "**/conftest.py"]
    created = _create(goals, real, "gaming", protected=protected, max_generations=1)
    view = aio(goals.start(created["goal"], 1))
    assert view["run_status"] == "BLOCKED"
    (decision,) = goals.audit(created["goal"])["decisions"]
    assert decision["decision"] == "REJECT_BLOCKED"
    assert "selected 2 tests, fewer than the base's 4 (2 deselected)" in decision["feedback"]
    (evidence,) = goals.audit(created["goal"])["evidence"]
    assert evidence["exit_status"] == 0
    assert evidence["tests"]["deselected"] == 2


def test_the_plan_may_allow_fewer_tests(goals, real, aio):
    protected = [p for p in DEFAULT_PROTECTED if p != "**/conftest.py"]
    created = _create(
        goals, real, "gaming", protected=protected, max_generations=1, allow_fewer=["tests"]
    )
    view = aio(goals.start(created["goal"], 1))
    assert view["run_status"] == "CLOSED", view["detail"]


def test_the_manifest_binds_the_protected_files(goals, real, aio):
    created = _create(goals, real, "direct")
    view = aio(goals.start(created["goal"], 1))
    frozen = _output(goals, view["delivery"], "SOURCE_FREEZE")
    assert set(frozen["protected"]) == {"conftest.py", "pyproject.toml", "tests/test_calc.py"}
    report = goals.audit(created["goal"])
    evidence = {
        e["check"]: {k: v for k, v in e.items() if k != "ordinal"} for e in report["evidence"]
    }
    (decision,) = report["decisions"]
    bound = manifest_of(1, frozen["frozen"], evidence, frozen["protected"])
    assert decision["manifest"] == digest_of(bound)
    assert decision["manifest"] != digest_of(manifest_of(1, frozen["frozen"], evidence))


def test_create_refuses_a_check_that_would_import_the_installed_copy(goals, real):
    with refused("CHECK_NOT_CANDIDATE") as info:
        _create(goals, real, "direct", checks={"tests": (real.python, "-I", "-m", "pytest")})
    assert "would import 'mylib' from" in str(info.value)
    assert goals.list() == []


def test_a_relative_project_folder_is_questioned_where_it_is(goals, real, monkeypatch):
    monkeypatch.chdir(real.project.parent)
    created = goals.create(
        objective="add() returns the sum",
        project=real.project.name,
        criteria=["tests/test_calc.py passes"],
        worker=PatchWorker(patches=(real.patches["direct"],)),
        python=real.python,
    )
    assert goals.goals.get(created["goal"])["goal"].project == str(real.project.resolve())


def test_bare_python_in_a_check_means_the_projects_python(goals, real):
    created = _create(goals, real, "direct", checks={"unit": ("python", "-m", "pytest", "-q")})
    goal = goals.goals.get(created["goal"])["goal"]
    assert goal.checks["unit"][0] == real.python


def test_no_default_runs_under_execsys_own_interpreter(real):
    # Only execsys's own bin/ on PATH: its python3 must not become the default.
    env = {**os.environ, "PATH": str(Path(EXECSYS).parent)}
    done = subprocess.run(
        [
            EXECSYS,
            "goal",
            "create",
            "--objective",
            "fix add",
            "--project",
            str(real.project),
            "--criterion",
            "tests pass",
            "--patch",
            real.patches["direct"],
            "--store",
            real.store,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("execsys: CHECK_NOT_CANDIDATE at --python: ")


def _cli(real: RealProject, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXECSYS, *args, "--store", real.store],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_end_to_end_gaming_refused_repair_accepted_exported_and_applied(goals, real, aio, tmp_path):
    gaming = _create(goals, real, "gaming")
    assert aio(goals.start(gaming["goal"], 1))["run_status"] == "FAILED"
    refused_export = _cli(real, "goal", "export", gaming["goal"])
    assert refused_export.returncode == 1
    assert refused_export.stderr.startswith("execsys: GOAL_NOT_ACCEPTED at ")

    created = _create(goals, real, "wrong", "right")
    view = aio(goals.start(created["goal"], 1))
    assert view["run_status"] == "CLOSED", view["detail"]
    assert view["next"].startswith(f"execsys goal export {created['goal']}")
    decisions = [d["decision"] for d in goals.audit(created["goal"])["decisions"]]
    assert decisions == ["REJECT_REPAIRABLE", "ACCEPT"]
    goals.close()  # the CLI reads the same store from here on

    patch_file = tmp_path / "accepted.patch"
    done = _cli(real, "goal", "export", created["goal"], "--output", str(patch_file), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["files"] == [CALC]
    assert summary["manifest"] == view["decision"]["manifest"]
    text = patch_file.read_text()
    assert "-    return a - b\n+    return a + b\n" in text
    assert f"# manifest {summary['manifest']}" in text
    assert summary["artifact"] == "sha256:" + hashlib.sha256(patch_file.read_bytes()).hexdigest()
    # The closed goal names what was exported, where to, and what to do next.
    status = json.loads(_cli(real, "goal", "status", created["goal"], "--json").stdout)
    assert status["exported"] == (
        f"patch {summary['artifact']} to {patch_file.resolve()} (manifest {summary['manifest']})"
    )
    assert status["next"].startswith(f"apply it with execsys goal apply {created['goal']}")

    # The exported diff applies with the usual tools onto a clean copy of the base.
    by_patch = tmp_path / "by-patch"
    shutil.copytree(real.project, by_patch)
    subprocess.run(["patch", "-p1", "-s", "-i", str(patch_file)], cwd=by_patch, check=True)
    assert (by_patch / CALC).read_text() == RIGHT

    # goal apply checks the base first, then writes, then checks the result.
    clean = tmp_path / "checkout"
    shutil.copytree(real.project, clean)
    done = _cli(real, "goal", "apply", created["goal"], "--to", str(clean))
    assert done.returncode == 0, done.stderr
    assert (clean / CALC).read_text() == RIGHT
    assert snapshot(clean) == snapshot(by_patch)
    # Again (an apply whose command was interrupted after it finished): nothing to do.
    again = _cli(real, "goal", "apply", created["goal"], "--to", str(clean), "--json")
    assert again.returncode == 0, again.stderr
    assert (json.loads(again.stdout)["files"], json.loads(again.stdout)["already_applied"]) == (
        [],
        True,
    )
    dirty = tmp_path / "dirty"
    shutil.copytree(real.project, dirty)
    (dirty / "src" / "mylib" / "extra.py").write_text("x = 1\n")
    before = snapshot(dirty)
    refused_apply = _cli(real, "goal", "apply", created["goal"], "--to", str(dirty))
    assert refused_apply.returncode == 1
    assert refused_apply.stderr.startswith(f"execsys: GOAL_MANIFEST_MISMATCH at {dirty}: ")
    assert snapshot(dirty) == before, "a refused apply writes nothing"
    other = tmp_path / "other"
    shutil.copytree(real.project, other)
    (other / "conftest.py").unlink()  # a different base
    refused_apply = _cli(real, "goal", "apply", created["goal"], "--to", str(other))
    assert refused_apply.stderr.startswith(f"execsys: GOAL_MANIFEST_MISMATCH at {other}: ")


def test_a_project_with_its_venv_and_git_inside_is_discovered_and_seeded(
    tmp_path, aio, monkeypatch
):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    real = make_real_project(tmp_path, venv_inside=True)
    (real.project / ".git").mkdir()
    (real.project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    goals = GoalRuntime(real.store)
    try:
        created = _create(goals, real, "direct", python=None)
        goal = goals.goals.get(created["goal"])["goal"]
        assert goal.python == str(real.project / ".venv" / "bin" / "python")
        view = aio(goals.start(created["goal"], 1))
        assert view["run_status"] == "CLOSED", view["detail"]
        frozen = _output(goals, view["delivery"], "SOURCE_FREEZE")
        # pyproject, conftest, two package files, the tests: no .git/, no .venv/.
        assert frozen["files"] == 5
        # -I ignores PYTHONPATH: mylib would come from .venv/, which is not the candidate.
        with refused("CHECK_NOT_CANDIDATE"):
            _create(goals, real, "direct", checks={"tests": ("python", "-I", "-m", "pytest")})
    finally:
        goals.close()


def test_a_goals_own_excluded_folders_are_left_out_everywhere(tmp_path, aio, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    real = make_real_project(tmp_path)
    (real.project / "datasets" / "big").mkdir(parents=True)
    (real.project / "datasets" / "big" / "rows.csv").write_text("a,b\n1,2\n")
    (real.project / "src" / "mylib" / "datasets").mkdir()  # at any depth
    (real.project / "src" / "mylib" / "datasets" / "x.csv").write_text("1\n")
    goals = GoalRuntime(real.store)
    try:
        with refused("GOAL_INVALID"):
            _create(goals, real, "direct", exclude=["a/b"])
        # The fix also writes into an excluded folder: custody and every digest ignore it.
        fix = tmp_path / "fix-and-data.patch"
        fix.write_text(
            Path(real.patches["direct"]).read_text() + added("datasets/new.csv", "a,b\n5,6\n")
        )
        real.patches["fix-and-data"] = str(fix)
        created = _create(goals, real, "fix-and-data", exclude=["datasets"])
        assert goals.goals.get(created["goal"])["goal"].exclude == ("datasets",)
        view = aio(goals.start(created["goal"], 1))
        assert view["run_status"] == "CLOSED", view["detail"]
        frozen = _output(goals, view["delivery"], "SOURCE_FREEZE")
        assert frozen["files"] == 5, "the five project files, no datasets/ at any depth"
        candidate = Path(goals._custody().workspace(view["delivery"]))
        assert [p.relative_to(candidate).as_posix() for p in candidate.rglob("*.csv")] == [
            "datasets/new.csv"
        ], "only what the worker wrote, which no snapshot holds"
        exported = goals.export(created["goal"])
        assert exported["files"] == [CALC]
        # A checkout whose datasets/ differs is still the base; apply leaves it alone.
        checkout = tmp_path / "checkout"
        shutil.copytree(real.project, checkout)
        (checkout / "datasets" / "big" / "rows.csv").write_text("a,b\n3,4\n")
        applied = goals.apply(created["goal"], str(checkout))
        assert applied["files"] == [CALC]
        assert (checkout / CALC).read_text() == RIGHT
        assert (checkout / "datasets" / "big" / "rows.csv").read_text().endswith("3,4\n")
    finally:
        goals.close()


def test_a_start_that_fails_at_seeding_leaves_a_readable_goal(goals, real, aio):
    created = _create(goals, real, "direct")
    os.mkfifo(real.project / "pipe")
    try:
        with refused("CUSTODY_SEED_INVALID"):
            aio(goals.start(created["goal"], 1))
    finally:
        (real.project / "pipe").unlink()
    view = goals.view(created["goal"])
    assert view["run_status"] == "FAILED"
    assert "CUSTODY_SEED_INVALID" in view["detail"]
    assert goals.audit(created["goal"])["journal"] == []
    assert [g["run_status"] for g in goals.list()] == ["FAILED"]
