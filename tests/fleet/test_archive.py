"""Runners that share only the PostgreSQL store: the workspace travels through the archive.

Each "machine" is its own working folder, so its own data folder (custody,
blobs, workspaces). A delivery started on one and continued on another must
find exactly the files the first one's accepted steps wrote.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.conftest import Fleet, wait_until
from tests.postgres.conftest import SERVER, create_database, drop_database

HERE = Path(__file__).parent

SPEC = """\
spec: execution-system/v1
graph: fleet-archive
input: {type: object}
start: one
nodes:
  one:
    {kind: action, executor: writer, workspace: write, outputs: {v: {type: integer}}, next: approve}
  approve:
    kind: wait
    wait: approval
    result: {type: object}
    authority: {roles: [maintainer]}
    next: two
  two: {kind: action, executor: writer, workspace: write, outputs: {v: {type: integer}}, next: done}
  done: {kind: terminal, outcome: succeeded}
"""


def machine(root: Path, url: str, log: Path) -> Fleet:
    """One machine's folder: its own data folder, the shared store and turn log."""
    fleet = Fleet(root, url)
    fleet.log = log
    writer = HERE / "agents" / "writer.py"
    (root / "execsys.yaml").write_text(
        f"executors:\n  writer: {{command: [{sys.executable}, {writer}]}}\n"
    )
    (root / "spec.yaml").write_text(SPEC)
    (root / "in.json").write_text("{}")
    (root / "ok.json").write_text(json.dumps({"approved": True}))
    (root / "authority.yaml").write_text("actors: {alice: [maintainer]}\napprover: alice\n")
    return fleet


def approve(fleet: Fleet, delivery: str) -> str:
    """Resolve the wait inline on ``fleet``'s machine; the delivery's status after it."""
    resolved = fleet.cli(
        *("resolve", delivery, "--node", "approve", "--result", "ok.json"),
        *("--actor", "alice", "--role", "maintainer", "--json"),
    )
    assert resolved.returncode == 0, resolved.stderr
    return str(json.loads(resolved.stdout)["status"])


@pytest.fixture
def store_url() -> Iterator[str]:
    if not SERVER:
        pytest.skip("EXECSYS_TEST_POSTGRES is not set")
    url = create_database()
    try:
        yield url
    finally:
        drop_database(url)


def test_a_delivery_continues_on_a_machine_that_never_saw_it(
    store_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "turns.log"
    a = machine(tmp_path / "a", store_url, log)
    b = machine(tmp_path / "b", store_url, log)
    started = a.cli(
        "run", "spec.yaml", "--input", "in.json", "--authority", "authority.yaml", "--json"
    )
    assert started.returncode == 0, started.stderr
    delivery = json.loads(started.stdout)["delivery"]
    assert json.loads(started.stdout)["status"] == "waiting"
    assert not (tmp_path / "b" / ".execsys").exists()

    assert approve(b, delivery) == "completed"  # driven on b, which never saw it
    assert log.read_text().splitlines() == ["one saw -", "two saw one"]
    workspace = tmp_path / "b" / ".execsys" / "custody" / "workspaces" / delivery
    assert (workspace / "notes.txt").read_text() == "one\ntwo\n"
    assert (workspace / "blob-one.bin").read_bytes() == (
        tmp_path / "a" / ".execsys" / "custody" / "workspaces" / delivery / "blob-one.bin"
    ).read_bytes()

    # Both machines see the same custody head; every journal verifies.
    heads = []
    for fleet in (a, b):
        shown = fleet.cli("inspect", delivery, "--json")
        assert shown.returncode == 0, shown.stderr
        heads.append(json.loads(shown.stdout)["custody"]["head"])
        assert fleet.cli("journal", "verify", delivery).returncode == 0
    assert heads[0] == heads[1]


def test_a_queued_delivery_is_driven_by_a_runner_elsewhere(store_url: str, tmp_path: Path) -> None:
    log = tmp_path / "turns.log"
    a = machine(tmp_path / "a", store_url, log)
    b = machine(tmp_path / "b", store_url, log)
    submitted = a.cli(
        "submit", "spec.yaml", "--input", "in.json", "--authority", "authority.yaml", "--json"
    )
    assert submitted.returncode == 0, submitted.stderr
    delivery = json.loads(submitted.stdout)["delivery"]
    runner = b.serve("b1")
    try:
        wait_until(lambda: b.statuses()[delivery] == "waiting", what="the first step on b")
        # Back on a, whose copy is now one step behind the database's.
        assert approve(a, delivery) == "completed"
    finally:
        runner.terminate()
        runner.wait(timeout=60)
    assert log.read_text().splitlines() == ["one saw -", "two saw one"]


@pytest.mark.parametrize(
    "kill_at",
    [
        "archive-publish:2:before",  # step one's savepoint not yet sent
        "archive-publish:2:after",  # archived and the archive's head moved; nothing local
        "custody-advance:1:after",  # the local head moved too; the checkpoint did not commit
    ],
)
def test_a_runner_killed_between_archiving_a_savepoint_and_its_checkpoint_loses_nothing(
    store_url: str, tmp_path: Path, kill_at: str
) -> None:
    log = tmp_path / "turns.log"
    a = machine(tmp_path / "a", store_url, log)
    b = machine(tmp_path / "b", store_url, log)
    # Another machine cannot see that a's process died: it waits out a's (short) lease.
    a.extra_env = {"EXECSYS_FAULT_KILL_AT": kill_at, "EXECSYS_LEASE_TTL": "1"}
    started = a.cli(
        "run", "spec.yaml", "--input", "in.json", "--authority", "authority.yaml", "--json"
    )
    assert started.returncode == -9, (started.returncode, started.stderr)
    assert log.read_text().splitlines() == ["one saw -"]
    (delivery,) = b.statuses()
    assert b.statuses()[delivery] == "running", "the dead runner's delivery waits for a directive"

    # Continued on b, which never saw it: step one runs again on the savepoint before it,
    # whatever the archive's head said when a died.
    time.sleep(1.2)
    recovered = b.cli("recover", delivery, "--directive", "continue", "--reason", "a died")
    assert recovered.returncode == 0, recovered.stderr
    assert b.statuses()[delivery] == "waiting"
    assert approve(b, delivery) == "completed"
    assert log.read_text().splitlines() == ["one saw -", "one saw -", "two saw one"]
    workspace = tmp_path / "b" / ".execsys" / "custody" / "workspaces" / delivery
    assert (workspace / "notes.txt").read_text() == "one\ntwo\n"
    heads = []
    for fleet in (a, b):
        fleet.extra_env = {}
        shown = fleet.cli("inspect", delivery, "--json")
        assert shown.returncode == 0, shown.stderr
        heads.append(json.loads(shown.stdout)["custody"]["head"])
        assert fleet.cli("journal", "verify", delivery).returncode == 0
    assert heads[0] == heads[1]
