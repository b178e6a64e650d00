"""The goal rows of the storage port: every backend in ``BACKENDS`` must pass these too.

Goals are the versioned rows an application keeps on the Host's store
(CodeClosure's); the tests speak the port and the Host's ``GoalTable`` over it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from host import GoalTable
from host.storage import Storage
from tests.storage.backends import Backend

ROOT = Path(__file__).resolve().parents[2]
Connect = Callable[[], Storage]


class Boom(Exception):
    """Raised inside a transaction to make it roll back."""


def test_a_goal_is_stored_at_version_one_and_read_by_another_handle(
    storage: Storage, connect: Connect
) -> None:
    table = GoalTable(storage)
    row = table.insert("g-1", b'{"objective": "x"}', "READY")
    assert (row["goal"], row["version"], row["state"], row["delivery"]) == ("g-1", 1, "READY", None)
    other = connect().goal("g-1")
    assert other is not None
    assert other["document"] == b'{"objective": "x"}'
    assert other["created"] == other["updated"] == row["created"]
    assert storage.goal("g-2") is None
    assert storage.goal_notes("g-2") == []


def test_a_duplicate_goal_is_refused_and_the_first_is_kept(storage: Storage) -> None:
    GoalTable(storage).insert("g-1", b"first", "READY")
    with pytest.raises(storage.errors), storage.transaction() as tx:
        tx.insert_goal("g-1", b"second", "READY")
    row = storage.goal("g-1")
    assert row is not None and row["document"] == b"first"


def test_advance_is_a_compare_and_set_on_the_version(storage: Storage, connect: Connect) -> None:
    table = GoalTable(storage)
    table.insert("g-1", b"{}", "READY")
    assert table.advance("g-1", 1, state="STARTED", delivery="d-1")
    assert not table.advance("g-1", 1, state="CANCELLED"), "a stale version moves nothing"
    row = connect().goal("g-1")
    assert row is not None
    assert (row["version"], row["state"], row["delivery"]) == (2, "STARTED", "d-1")
    assert row["updated"] >= row["created"]
    assert table.advance("g-1", 2, state="CANCELLED"), "no delivery given keeps the one stored"
    row = storage.goal("g-1")
    assert row is not None and (row["version"], row["state"], row["delivery"]) == (
        3,
        "CANCELLED",
        "d-1",
    )
    assert not table.advance("g-none", 1, state="STARTED"), "no such goal: nothing to move"


def test_goal_writes_roll_back_with_their_transaction(storage: Storage, connect: Connect) -> None:
    table = GoalTable(storage)
    table.insert("g-1", b"{}", "READY")
    with pytest.raises(Boom), storage.transaction() as tx:  # noqa: PT012
        assert tx.advance_goal("g-1", 1, "STARTED", "d-1")
        tx.add_goal_note("g-1", "never")
        tx.insert_goal("g-2", b"{}", "READY")
        tx.insert_delivery("d-1", "g", "sha256:g", "sha256:d", b"doc")
        raise Boom
    other = connect()
    row = other.goal("g-1")
    assert row is not None and (row["version"], row["state"], row["delivery"]) == (1, "READY", None)
    assert other.goal("g-2") is None
    assert other.goal_notes("g-1") == []
    assert other.delivery("d-1") is None
    # ...and commit with the Host's own rows when the body ends normally.
    with storage.transaction() as tx:
        assert tx.advance_goal("g-1", 1, "STARTED", "d-1")
        tx.insert_delivery("d-1", "g", "sha256:g", "sha256:d", b"doc")
    assert other.delivery("d-1") is not None
    row = other.goal("g-1")
    assert row is not None and row["delivery"] == "d-1"


def test_notes_are_kept_per_goal_oldest_first(storage: Storage, connect: Connect) -> None:
    table = GoalTable(storage)
    table.insert("g-1", b"{}", "READY")
    table.insert("g-2", b"{}", "READY")
    for text in ("first", "second", "third"):
        table.note("g-1", text)
    table.note("g-2", "other goal")
    assert connect().goal_notes("g-1") == ["first", "second", "third"]
    assert table.notes("g-2") == ["other goal"]


def test_goals_are_listed_newest_first(storage: Storage) -> None:
    table = GoalTable(storage)
    for name in ("g-a", "g-b", "g-c"):
        table.insert(name, json.dumps({"objective": name}).encode(), "READY")
    listed = table.rows()
    assert [r["goal"] for r in listed] == ["g-c", "g-b", "g-a"]
    assert json.loads(listed[0]["document"]) == {"objective": "g-c"}


_RACER = """
import json, os, sys, time
from host import GoalTable
{child}
table = GoalTable(storage)
while not os.path.exists(GO):
    time.sleep(0.005)
won = []
for _ in range(ROUNDS):
    row = table.get("g-1")
    if table.advance("g-1", row["version"], state="STARTED", delivery=sys.argv[1]):
        won.append(row["version"])
storage.close()
print(json.dumps(won))
"""


def test_processes_racing_on_one_goal_never_both_win_a_version(
    storage: Storage, backend: Backend, location: str, tmp_path: Path
) -> None:
    GoalTable(storage).insert("g-1", b"{}", "READY")
    rounds, workers = 30, 3
    go = tmp_path / "go"
    source = f"LOCATION = {location!r}\nROUNDS = {rounds}\nGO = {str(go)!r}\n" + _RACER.format(
        child=textwrap.dedent(backend.child)
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", source, f"d-{i}"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(workers)
    ]
    go.touch()
    won: list[int] = []
    for proc in procs:
        out, err = proc.communicate(timeout=110)
        assert proc.returncode == 0, err
        won.extend(json.loads(out))
    row = storage.goal("g-1")
    assert row is not None
    assert sorted(won) == list(range(1, row["version"])), "each version was won exactly once"
    assert len(won) >= rounds, "at least one racer wins each of its rounds' reads"
