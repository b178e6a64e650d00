"""A process SIGKILLed while it seeds a workspace leaves custody consistent.

Seeding writes every blob and every workspace file unflushed, flushes them all
at once, publishes the blobs, then renames the workspace into place and records
the head. A real child process is killed at each of those boundaries, and once
at whatever moment it has reached after seeding began. Then a fresh instance
opens the delivery again and must find exactly the seed: the head is the
seed's savepoint, every blob under its final name is complete, the workspace
matches the head byte for byte and no staging folder is left.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contracts import DeliveryId
from execution_system.custody import FileCustody, _workspace
from execution_system.custody._durable import SYNCFS_MIN

DELIVERY = DeliveryId("seeded")
CHILD = """
import sys
from execution_system.custody import FileCustody, _workspace
FileCustody(sys.argv[1]).open(sys.argv[2], seed=sys.argv[3])
"""


def _seed(root: Path, files: int) -> Path:
    seed = root / "seed"
    for i in range(files):
        folder = seed / "src" / f"d{i // 50:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"m{i:04d}.py").write_text(f"VALUE = {i}\n" * (1 + i % 7))
    (seed / "run.sh").write_text("#!/bin/sh\n")
    (seed / "run.sh").chmod(0o755)
    (seed / "link").symlink_to("src/d00/m0000.py")
    return seed


def _child(custody_root: Path, seed: Path, kill_at: str | None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "EXECSYS_FAULT_KILL_AT"}
    if kill_at is not None:
        env["EXECSYS_FAULT_KILL_AT"] = kill_at
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, os.fspath(custody_root), DELIVERY, os.fspath(seed)],
        env=env,
        stderr=subprocess.PIPE,
    )


def _assert_consistent(custody_root: Path, seed: Path, tmp: Path) -> None:
    reference = FileCustody(tmp / "reference").open(DeliveryId("reference"), seed=str(seed))
    custody = FileCustody(custody_root)
    head = custody.open(DELIVERY, seed=str(seed))
    assert head == reference
    assert custody.head(DELIVERY) == reference
    # The workspace holds the head exactly, every byte re-read.
    assert custody.snapshot(DELIVERY, full_verify=True).savepoint == reference
    # Every blob under its final name is complete (named by its own content) ...
    blobs = custody_root / "blobs"
    for shard in blobs.iterdir():
        if shard.name == ".staging":
            continue
        for blob in shard.iterdir():
            assert hashlib.sha256(blob.read_bytes()).hexdigest() == shard.name + blob.name
    # ... and the head's tree can be written out from them, verified.
    custody.export(DELIVERY, head, tmp / "exported")
    # No half-seeded workspace is left beside the real one.
    assert sorted(p.name for p in (custody_root / "workspaces").iterdir()) == [DELIVERY]


@pytest.mark.parametrize(
    "kill_at",
    [
        "custody-seed-flush:1:before",
        "custody-seed-flush:1:after",
        "custody-seed-publish:1:before",
        "custody-seed-publish:1:after",
    ],
)
def test_a_seed_killed_at_each_step_reopens_as_the_seed(tmp_path: Path, kill_at: str) -> None:
    seed = _seed(tmp_path, SYNCFS_MIN + 72)  # enough files for the one-flush path
    custody_root = tmp_path / "custody"
    child = _child(custody_root, seed, kill_at)
    _, stderr = child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL, stderr.decode()
    _assert_consistent(custody_root, seed, tmp_path)


def test_a_seed_killed_from_outside_midway_reopens_as_the_seed(tmp_path: Path) -> None:
    seed = _seed(tmp_path, 3000)
    custody_root = tmp_path / "custody"
    child = _child(custody_root, seed, None)
    workspaces = custody_root / "workspaces"
    deadline = time.monotonic() + 120
    # Kill as soon as seeding has begun (its private staging folder exists).
    while not (workspaces.is_dir() and any(workspaces.iterdir())):
        assert child.poll() is None, "the child ended before seeding began"
        assert time.monotonic() < deadline, "seeding never began"
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=120)
    assert child.returncode in (-signal.SIGKILL, 0)
    _assert_consistent(custody_root, seed, tmp_path)


def test_an_uninterrupted_seed_is_the_seed(tmp_path: Path) -> None:
    seed = _seed(tmp_path, SYNCFS_MIN + 72)
    custody_root = tmp_path / "custody"
    child = _child(custody_root, seed, None)
    _, stderr = child.communicate(timeout=120)
    assert child.returncode == 0, stderr.decode()
    _assert_consistent(custody_root, seed, tmp_path)


@pytest.mark.parametrize("budget", [0, 4000])
def test_a_seed_beyond_the_memory_budget_is_written_from_the_staged_blobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    # Contents the scan kept in memory are written from there, the rest from the
    # staged blobs: a budget of 0 or of a few files must give the same exact copy.
    monkeypatch.setattr(_workspace, "_RETAIN_BYTES", budget)
    seed = _seed(tmp_path, SYNCFS_MIN + 72)
    custody = FileCustody(tmp_path / "custody")
    head = custody.open(DELIVERY, seed=str(seed))
    reference = FileCustody(tmp_path / "reference").open(DeliveryId("reference"), seed=str(seed))
    assert head == reference
    assert custody.snapshot(DELIVERY, full_verify=True).savepoint == reference
