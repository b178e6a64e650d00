"""Pruning a finished delivery's superseded savepoints (decision 0056).

``prune`` keeps the savepoints it is told to keep and the head, forgets the
others (log line and manifest) and deletes the blobs no remaining manifest of
any delivery names. A real child process is SIGKILLed at each step of it; a
fresh instance must then find custody verifiable (every listed savepoint
exports byte for byte, every blob is named by its content), and pruning
again must finish the job.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from contracts import DeliveryId, ExecsysError, SavepointId
from execution_system.custody import FileCustody

DELIVERY = DeliveryId("goal-delivery")
OTHER = DeliveryId("other-delivery")
CHILD = """
import sys
from execution_system.custody import FileCustody
FileCustody(sys.argv[1]).prune(sys.argv[2], (sys.argv[3],))
"""


def _history(root: Path, tmp: Path) -> tuple[FileCustody, list[SavepointId]]:
    """A delivery with base, a rejected generation and the accepted head; and another."""
    seed = tmp / "seed"
    (seed / "src").mkdir(parents=True)
    (seed / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (seed / "README.md").write_text("calc\n")
    custody = FileCustody(root)
    base = custody.open(DELIVERY, seed=str(seed))
    work = Path(custody.workspace(DELIVERY))
    (work / "src" / "calc.py").write_text("def add(a, b):\n    return a * b\n")  # wrong fix
    (work / "src" / "notes.txt").write_text("shared with the other delivery\n")
    (work / "src" / "copy.md").write_text("calc\n")  # same content as the base's README
    rejected = custody.snapshot(DELIVERY).savepoint
    (work / "src" / "calc.py").write_text("def add(a, b):\n    return a + b\n")  # repair
    for gone in ("notes.txt", "copy.md"):
        (work / "src" / gone).unlink()
    accepted = custody.snapshot(DELIVERY).savepoint
    custody.advance(DELIVERY, accepted)
    other_seed = tmp / "other-seed"
    other_seed.mkdir()
    (other_seed / "notes.txt").write_text("shared with the other delivery\n")
    custody.open(OTHER, seed=str(other_seed))
    return custody, [base, rejected, accepted]


def _blob(root: Path, text: str) -> Path:
    digest = hashlib.sha256(text.encode()).hexdigest()
    return root / "blobs" / digest[:2] / digest[2:]


def _assert_verifiable(root: Path, tmp: Path, listed: list[SavepointId]) -> None:
    custody = FileCustody(root)
    assert [info.savepoint for info in custody.savepoints(DELIVERY)] == listed
    assert custody.head(DELIVERY) == listed[-1]
    for i, savepoint in enumerate(listed):
        # Written out of the blobs and verified against the manifest, byte for byte.
        custody.export(DELIVERY, savepoint, tmp / f"out-{len(listed)}-{i}")
    for shard in (root / "blobs").iterdir():
        if shard.name != ".staging":
            for blob in shard.iterdir():
                assert hashlib.sha256(blob.read_bytes()).hexdigest() == shard.name + blob.name


def test_prune_keeps_the_base_and_the_head_and_frees_only_unshared_blobs(tmp_path):
    root = tmp_path / "custody"
    custody, (base, rejected, accepted) = _history(root, tmp_path)
    wrong = "def add(a, b):\n    return a * b\n"
    assert _blob(root, wrong).is_file()

    report = custody.prune(DELIVERY, (base,))

    assert report.kept == (base, accepted)
    assert (report.savepoints, report.manifests) == (1, 1)
    assert report.blobs == 1  # the wrong fix's content, named by no other manifest
    assert not _blob(root, wrong).exists()
    assert _blob(root, "calc\n").is_file()  # shared by content with the base
    assert _blob(root, "shared with the other delivery\n").is_file()  # another delivery's
    _assert_verifiable(root, tmp_path, [base, accepted])
    with pytest.raises(ExecsysError) as refused:
        custody.restore(DELIVERY, rejected)
    assert refused.value.code.value == "CUSTODY_SAVEPOINT_UNKNOWN"
    # The live tree is untouched and still validates as the head.
    assert custody.snapshot(DELIVERY).savepoint == accepted
    # Pruning again removes nothing more.
    again = custody.prune(DELIVERY, (base,))
    assert (again.savepoints, again.manifests, again.blobs) == (0, 0, 0)


def test_prune_always_keeps_the_head_and_refuses_an_unknown_savepoint(tmp_path):
    root = tmp_path / "custody"
    custody, (_base, _rejected, accepted) = _history(root, tmp_path)
    with pytest.raises(ExecsysError) as refused:
        custody.prune(DELIVERY, (SavepointId("sha256:" + "0" * 64),))
    assert refused.value.code.value == "CUSTODY_SAVEPOINT_UNKNOWN"
    assert len(custody.savepoints(DELIVERY)) == 3  # nothing was touched
    assert custody.prune(DELIVERY, ()).kept == (accepted,)
    _assert_verifiable(root, tmp_path, [accepted])


def test_another_instance_sees_the_pruned_log(tmp_path):
    root = tmp_path / "custody"
    custody, (base, rejected, accepted) = _history(root, tmp_path)
    reader = FileCustody(root)
    assert len(reader.savepoints(DELIVERY)) == 3  # indexed before the prune
    custody.prune(DELIVERY, (base,))
    assert [info.savepoint for info in reader.savepoints(DELIVERY)] == [base, accepted]
    with pytest.raises(ExecsysError):
        reader.advance(DELIVERY, rejected)


@pytest.mark.slow
@pytest.mark.parametrize(
    "kill_at",
    [
        "custody-prune-log:1:before",
        "custody-prune-log:1:after",
        "custody-prune-manifests:1:after",
        "custody-collect:1:before",
    ],
)
def test_a_prune_killed_at_each_step_leaves_custody_verifiable(tmp_path, kill_at):
    root = tmp_path / "custody"
    _, (base, rejected, accepted) = _history(root, tmp_path)
    env = {**os.environ, "EXECSYS_FAULT_KILL_AT": kill_at}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, os.fspath(root), DELIVERY, base],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    before_log = kill_at == "custody-prune-log:1:before"
    _assert_verifiable(
        root, tmp_path, [base, rejected, accepted] if before_log else [base, accepted]
    )
    # Pruning again completes what the killed one began.
    FileCustody(root).prune(DELIVERY, (base,))
    _assert_verifiable(root, tmp_path, [base, accepted])
    assert len(list((root / "deliveries" / DELIVERY / "manifests").iterdir())) == 2
    assert not _blob(root, "def add(a, b):\n    return a * b\n").exists()
