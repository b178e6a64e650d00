"""A CodeClosure goal carried out on a PostgreSQL store, through the real CLI.

The goal rows live in the Host's store like its deliveries: ``goal create``,
``start`` (to acceptance), ``status``, ``export``, ``cancel`` and ``audit``
answer on PostgreSQL as on SQLite, and a stale version is refused the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.codeclosure.helpers import CALC, CHECK_PATH, Sample, make_sample

EXECSYS = str(Path(sys.executable).with_name("execsys"))


def _cli(
    sample: Sample, url: str, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    # The working directory holds the data folder (.execsys) a PostgreSQL store uses:
    # another one stands for another machine.
    env = {k: v for k, v in os.environ.items() if k != "EXECSYS_STORE"}
    return subprocess.run(
        [EXECSYS, *args, "--store", url],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd or sample.root,
        env=env,
        check=False,
    )


def _create(sample: Sample, url: str, *patches: str) -> dict[str, object]:
    done = _cli(
        sample, url, "goal", "create", "--objective", "add() returns the sum",
        "--project", str(sample.project), "--criterion", "the check passes",
        "--check", f"tests={sys.executable} {CHECK_PATH}",
        *(arg for name in patches for arg in ("--patch", sample.patches[name])), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    view: dict[str, object] = json.loads(done.stdout)
    return view


def _archived(url: str, delivery: str) -> tuple[list[str], set[str]]:
    """The delivery's archived savepoints, and every content the archive holds."""
    with psycopg.connect(url) as conn:
        savepoints = conn.execute(
            "SELECT savepoint FROM execsys_manifests WHERE delivery = %s ORDER BY created",
            (delivery,),
        ).fetchall()
        blobs = conn.execute("SELECT digest FROM execsys_blobs").fetchall()
    return [str(s) for (s,) in savepoints], {str(d) for (d,) in blobs}


def _goal_rows(url: str) -> list[tuple[str, int, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT goal, version, state FROM execsys_goals ORDER BY goal")
        return [(str(g), int(v), str(s)) for g, v, s in rows.fetchall()]


@pytest.mark.timeout(300)  # a dozen CLI processes, each opening the store
def test_a_goal_runs_to_acceptance_and_exports_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    sample = make_sample(tmp_path)
    created = _create(sample, pg_url, "direct")
    goal = str(created["goal"])
    assert (created["version"], created["run_status"]) == (1, "READY")
    assert _goal_rows(pg_url) == [(goal, 1, "READY")], "the goal row is in the PostgreSQL store"
    assert not (sample.root / ".execsys" / "state.db").exists(), "no SQLite file on the side"

    stale = _cli(sample, pg_url, "goal", "start", goal, "--expected-version", "2")
    assert stale.returncode == 1
    (line,) = stale.stderr.strip().splitlines()
    assert line.startswith(f"execsys: GOAL_STALE_VERSION at {goal}: the goal is at version 1")

    started = _cli(sample, pg_url, "goal", "start", goal, "--expected-version", "1", "--json")
    assert started.returncode == 0, started.stderr
    view = json.loads(started.stdout)
    assert (view["run_status"], view["version"]) == ("CLOSED", 2)
    delivery = view["delivery"]
    assert _goal_rows(pg_url) == [(goal, 2, "STARTED")]

    status = _cli(sample, pg_url, "goal", "status", goal, "--json")
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert (shown["goal"], shown["run_status"], shown["delivery"]) == (goal, "CLOSED", delivery)
    listing = _cli(sample, pg_url, "goal", "status", "--json")
    assert listing.returncode == 0, listing.stderr
    listed = json.loads(listing.stdout)["goals"]
    assert [(g["goal"], g["run_status"]) for g in listed] == [(goal, "CLOSED")]

    exported = _cli(sample, pg_url, "goal", "export", goal, "--json")
    assert exported.returncode == 0, exported.stderr
    change = json.loads(exported.stdout)
    assert change["files"] == [CALC]
    assert "+    return a + b" in change["patch"]
    assert change["workspace_released"] is True

    audit = _cli(sample, pg_url, "goal", "audit", goal, "--json")
    assert audit.returncode == 0, audit.stderr
    verified = _cli(sample, pg_url, "journal", "verify", delivery)
    assert verified.returncode == 0, verified.stderr

    # A closed goal cannot be cancelled; the refusal changes nothing.
    late = _cli(sample, pg_url, "goal", "cancel", goal, "--expected-version", "2", "--reason", "x")
    assert late.returncode == 1
    assert late.stderr.startswith("execsys: GOAL_ILLEGAL_TRANSITION")
    assert _goal_rows(pg_url) == [(goal, 2, "STARTED")]


@pytest.mark.timeout(300)
def test_a_goal_closed_on_one_machine_is_exported_and_applied_on_another(
    tmp_path: Path, pg_url: str
) -> None:
    sample = make_sample(tmp_path)
    goal = str(_create(sample, pg_url, "wrong", "right")["goal"])
    started = _cli(sample, pg_url, "goal", "start", goal, "--expected-version", "1", "--json")
    assert started.returncode == 0, started.stderr
    view = json.loads(started.stdout)
    assert (view["run_status"], view["generation"]) == ("CLOSED", 2)
    # The base, the rejected candidate (a * b) and the accepted one.
    savepoints, contents = _archived(pg_url, view["delivery"])
    assert len(savepoints) == 3
    rejected = "sha256:" + hashlib.sha256(b"def add(a, b):\n    return a * b\n").hexdigest()
    assert rejected in contents

    # Another machine: its own empty data folder and a clean checkout of the base.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    checkout = tmp_path / "checkout"
    shutil.copytree(sample.project, checkout)
    bundle = elsewhere / "change.bundle"
    exported = _cli(sample, pg_url, "goal", "export", goal, "--json", cwd=elsewhere)
    assert exported.returncode == 0, exported.stderr
    change = json.loads(exported.stdout)
    assert change["files"] == [CALC]
    assert "+    return a + b" in change["patch"]
    # The export pruned the shared archive too: the rejected generation's tree, and
    # the content only it named, are gone; another machine still exports the rest.
    assert change["archive_savepoints_pruned"] == 1
    assert _archived(pg_url, view["delivery"])[0] == [savepoints[0], savepoints[-1]]
    assert rejected not in _archived(pg_url, view["delivery"])[1]
    again = _cli(
        sample, pg_url, "goal", "export", goal, "--format", "bundle", "--output", str(bundle),
        "--json", cwd=elsewhere,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["manifest"] == change["manifest"], "the same change"
    applied = _cli(sample, pg_url, "goal", "apply", goal, "--to", str(checkout), cwd=elsewhere)
    assert applied.returncode == 0, applied.stderr
    assert (checkout / CALC).read_text() == "def add(a, b):\n    return a + b\n"
    # The machine that ran the goal still exports it (its cache was released, not needed).
    first = _cli(sample, pg_url, "goal", "export", goal, "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["patch"] == change["patch"]


def test_a_ready_goal_is_cancelled_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    sample = make_sample(tmp_path)
    goal = str(_create(sample, pg_url, "direct")["goal"])
    done = _cli(
        sample, pg_url, "goal", "cancel", goal, "--expected-version", "1", "--reason", "no",
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["run_status"] == "CANCELLED"
    assert _goal_rows(pg_url) == [(goal, 2, "CANCELLED")]
    missing = _cli(sample, pg_url, "goal", "status", "g-000000000000")
    assert missing.returncode != 0
    assert missing.stderr.startswith("execsys: GOAL_NOT_FOUND at g-000000000000")


def test_the_console_serves_goals_of_a_postgresql_store(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    import httpx

    from execution_system.codeclosure import GoalRuntime
    from execution_system.web import create_app
    from tests.codeclosure.helpers import create

    sample = make_sample(tmp_path)
    monkeypatch.chdir(sample.root)  # the data folder a PostgreSQL store uses
    runtime = GoalRuntime(pg_url)
    try:
        goal = create(runtime, sample, sample.worker("direct"))["goal"]
        assert asyncio.run(runtime.start(goal, 1))["run_status"] == "CLOSED"
        app = create_app(runtime.runner.host, goals=runtime)

        async def fetch(path: str) -> httpx.Response:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
                return await c.get(path)

        listed = asyncio.run(fetch("/api/v1/goals"))
        audit = asyncio.run(fetch(f"/api/v1/goals/{goal}"))
        exported = asyncio.run(fetch(f"/api/v1/goals/{goal}/export"))
    finally:
        runtime.close()
    assert listed.status_code == 200, listed.text
    assert [(g["goal"], g["run_status"]) for g in listed.json()["goals"]] == [(goal, "CLOSED")]
    assert audit.status_code == 200 and audit.json()["run_status"] == "CLOSED"
    assert exported.status_code == 200 and "+    return a + b" in exported.text


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_goal_whose_runner_was_killed_is_resumed_and_exported_on_another_machine(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.codeclosure.test_recovery import Setup, _wait_for

    setup = Setup(tmp_path)
    setup.store = pg_url
    setup.env["EXECSYS_LEASE_TTL"] = "2"  # how soon another machine may take over
    here, there = tmp_path / "here", tmp_path / "there"  # each its own data folder
    here.mkdir()
    there.mkdir()
    monkeypatch.chdir(here)
    goal = setup.create()
    setup.start_and_kill(goal)

    # Another machine cannot see that process die: it sees the lease expire.
    monkeypatch.chdir(there)
    assert not (there / ".execsys" / "custody").exists()
    _wait_for(lambda: setup.status(goal)["run_status"] == "BLOCKED", "the lease to expire")
    view = setup.status(goal)
    assert "stopped renewing its lease" in view["detail"]
    assert view["next"].startswith(f"execsys goal resume {goal} --expected-version 2")
    listed = json.loads(setup.cli("goal", "status", "--json").stdout)["goals"]
    assert [g["run_status"] for g in listed] == ["BLOCKED"]
    (setup.marks / "release").write_text("")
    done = setup.cli("goal", "resume", goal, "--expected-version", "2", "--reason", "killed")
    assert done.returncode == 0, done.stdout + done.stderr
    assert setup.status(goal)["run_status"] == "CLOSED"
    exported = setup.cli("goal", "export", goal, "--json")
    assert exported.returncode == 0, exported.stderr
    change = json.loads(exported.stdout)
    assert change["files"] == [CALC]
    assert "+    return a + b" in change["patch"]
    assert change["workspace_released"] is True, "the goal's workspace was here now"
