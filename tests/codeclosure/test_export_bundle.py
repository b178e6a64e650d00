"""``goal export --format bundle``: the accepted change as one git commit; workspace released.

Real git, real bundles, the CLI as a user runs it: a project that is a clean git
checkout gets a commit on top of its ``HEAD`` (a thin bundle naming ``HEAD`` as
its prerequisite); a dirty or non-git project gets a self-contained bundle
(the base as a root commit, the change on top). Either way, fetching the bundle
and checking it out gives exactly the accepted digest.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from execution_system.codeclosure import GoalRuntime, PatchWorker
from execution_system.codeclosure._source import source_digest
from tests.codeclosure.helpers import EXECSYS, snapshot
from tests.codeclosure.realproject import CALC, RIGHT, RealProject, make_real_project

GIT_ENV = {
    "GIT_AUTHOR_NAME": "dev",
    "GIT_AUTHOR_EMAIL": "dev@example.org",
    "GIT_COMMITTER_NAME": "dev",
    "GIT_COMMITTER_EMAIL": "dev@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _cli(real: RealProject, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXECSYS, *args, "--store", real.store],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )


def _closed_goal(
    real: RealProject, aio: Any, patches: tuple[str, ...] = ("direct",)
) -> tuple[str, dict[str, Any]]:
    goals = GoalRuntime(real.store)
    try:
        created = goals.create(
            objective="add() returns the sum",
            project=str(real.project),
            criteria=["tests/test_calc.py passes"],
            worker=PatchWorker(patches=tuple(real.patches[p] for p in patches)),
            python=real.python,
        )
        view = aio(goals.start(created["goal"], 1))
        assert view["run_status"] == "CLOSED", view["detail"]
        return created["goal"], view
    finally:
        goals.close()


def _checked_out(bundle: Path, ref: str, into: Path) -> Path:
    """A fresh repository holding the bundle's ref, checked out."""
    into.mkdir()
    _git(into, "init", "-q")
    _git(into, "fetch", "-q", str(bundle), f"{ref}:{ref}")
    _git(into, "checkout", "-q", ref)
    return into


@pytest.fixture
def real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RealProject:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    return make_real_project(tmp_path)


def test_a_clean_git_checkout_gets_one_commit_on_its_head(real, aio, tmp_path):
    _git(real.project, "init", "-q", "-b", "main")
    _git(real.project, "add", "-A")
    _git(real.project, "commit", "-q", "-m", "the base")
    head = _git(real.project, "rev-parse", "HEAD")
    before = snapshot(real.project)
    goal, view = _closed_goal(real, aio)

    bundle = tmp_path / "out" / "goal.bundle"
    done = _cli(
        real, "goal", "export", goal, "--format", "bundle", "--output", str(bundle), "--json"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["format"] == "bundle"
    assert (report["parent"], report["prerequisite"]) == (head, True)
    assert report["files"] == [CALC]
    assert report["manifest"] == view["decision"]["manifest"]
    assert report["workspace_released"] is True
    assert snapshot(real.project) == before, "export wrote into the project"

    # In a clone of the project, the bundle fetches as one commit on the base.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(real.project), str(clone)], check=True)
    _git(clone, "fetch", "-q", str(bundle), f"{report['ref']}:{report['ref']}")
    _git(clone, "checkout", "-q", report["ref"])
    assert _git(clone, "rev-parse", "HEAD^") == head
    assert _git(clone, "diff", "--name-only", "HEAD^", "HEAD") == CALC
    assert (clone / CALC).read_text() == RIGHT
    assert source_digest(clone)[0] == report["frozen"]
    message = _git(clone, "log", "-1", "--format=%B")
    assert f"Execsys-Manifest: {report['manifest']}" in message

    # The savepoints outlive the workspace: the same export again, same commit.
    again = _cli(
        real, "goal", "export", goal, "--format", "bundle", "--output", str(bundle), "--json"
    )
    assert again.returncode == 0, again.stderr
    repeated = json.loads(again.stdout)
    assert repeated["commit"] == report["commit"]
    assert repeated["workspace_released"] is False


def test_a_dirty_or_plain_project_gets_a_self_contained_bundle(real, aio, tmp_path):
    # Not a git repository at all: the base becomes a root commit.
    goal, _ = _closed_goal(real, aio)
    bundle = tmp_path / "goal.bundle"
    done = _cli(
        real, "goal", "export", goal, "--format", "bundle", "--output", str(bundle), "--json"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["prerequisite"] is False
    repo = _checked_out(bundle, report["ref"], tmp_path / "fetched")
    assert source_digest(repo)[0] == report["frozen"]
    _git(repo, "checkout", "-q", "HEAD^")
    assert source_digest(repo)[0] == report["base"]
    assert _git(repo, "rev-list", "--count", report["ref"]) == "2"


def test_a_checkout_with_uncommitted_changes_is_not_the_parent(real, aio, tmp_path):
    _git(real.project, "init", "-q", "-b", "main")
    _git(real.project, "add", "-A")
    _git(real.project, "commit", "-q", "-m", "the base")
    (real.project / "NOTES.txt").write_text("not committed\n")
    goal, _ = _closed_goal(real, aio)
    bundle = tmp_path / "goal.bundle"
    done = _cli(
        real, "goal", "export", goal, "--format", "bundle", "--output", str(bundle), "--json"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # HEAD's tree lacks NOTES.txt, so HEAD is not the base the goal started from.
    assert report["prerequisite"] is False
    repo = _checked_out(bundle, report["ref"], tmp_path / "fetched")
    assert (repo / "NOTES.txt").read_text() == "not committed\n"
    assert source_digest(repo)[0] == report["frozen"]


def test_a_bundle_needs_an_output_file_and_an_accepted_goal(real, aio, tmp_path):
    no_output = _cli(real, "goal", "export", "goal-x", "--format", "bundle")
    assert no_output.returncode == 2
    assert no_output.stderr.startswith("execsys: USAGE at --format bundle: ")
    goals = GoalRuntime(real.store)
    try:
        created = goals.create(
            objective="nothing yet",
            project=str(real.project),
            criteria=["none"],
            worker=PatchWorker(patches=(real.patches["direct"],)),
            python=real.python,
        )
    finally:
        goals.close()
    bundle = tmp_path / "goal.bundle"
    refused = _cli(
        real, "goal", "export", created["goal"], "--format", "bundle", "--output", str(bundle)
    )
    assert refused.returncode == 1
    assert refused.stderr.startswith("execsys: GOAL_NOT_ACCEPTED at ")
    assert not bundle.exists()


def _savepoints(real: RealProject, goal: str) -> list[str]:
    goals = GoalRuntime(real.store)
    try:
        delivery = goals.goals.get(goal)["delivery"]
        return [info.savepoint for info in goals._custody().savepoints(delivery)]
    finally:
        goals.close()


@pytest.mark.parametrize("keep", [False, True])
def test_export_prunes_the_rejected_generations_unless_asked_to_keep_them(real, aio, keep):
    goal, view = _closed_goal(real, aio, ("wrong", "right"))
    assert view["generation"] == 2
    before = _savepoints(real, goal)
    assert len(before) == 3  # the base, the rejected candidate, the accepted one
    flags = ["--keep-history"] if keep else []
    done = _cli(real, "goal", "export", goal, "--json", *flags)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["workspace_released"] is True
    assert report["savepoints_pruned"] == (0 if keep else 1)
    assert _savepoints(real, goal) == (before if keep else [before[0], before[-1]])
    # The base and the accepted tree are all an export needs: the same change again.
    again = json.loads(_cli(real, "goal", "export", goal, "--json").stdout)
    assert (again["patch"], again["savepoints_pruned"]) == (report["patch"], 0 if not keep else 1)
    assert _cli(real, "goal", "audit", goal).returncode == 0
