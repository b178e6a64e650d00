"""When custody flushes a batch with one ``syncfs`` and when it falls back to an fsync per file.

Durability itself cannot be observed without cutting the power; what these
tests pin is the choice: the one-flush path is taken only for a large batch on
a file system opened before the batch was written, and every other case (a
small batch, a file system not opened in advance, a failing or missing
``syncfs``) fsyncs each file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from execution_system.custody import _durable
from execution_system.custody._durable import SYNCFS_MIN, Flusher


def _files(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"f{i}" for i in range(count)]
    for path in paths:
        path.write_bytes(b"x")
    return paths


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Batch sizes handed to the per-file fsync path (which still runs for real)."""
    calls: list[int] = []
    real = _durable.fsync_files

    def spy(paths: list[Path]) -> None:
        calls.append(len(paths))
        real(paths)

    monkeypatch.setattr(_durable, "fsync_files", spy)
    return calls


@pytest.mark.skipif(_durable._syncfs is None, reason="no syncfs that reports errors here")
def test_a_large_batch_on_an_opened_file_system_takes_one_syncfs(
    tmp_path: Path, fsynced: list[int]
) -> None:
    with Flusher([tmp_path]) as flusher:
        flusher.files(_files(tmp_path / "a", SYNCFS_MIN))
    assert fsynced == []


def test_a_small_batch_is_fsynced_file_by_file(tmp_path: Path, fsynced: list[int]) -> None:
    with Flusher([tmp_path]) as flusher:
        flusher.files(_files(tmp_path / "a", SYNCFS_MIN - 1))
    assert fsynced == [SYNCFS_MIN - 1]


def test_a_file_system_not_opened_in_advance_is_fsynced_file_by_file(
    tmp_path: Path, fsynced: list[int]
) -> None:
    with Flusher([]) as flusher:
        flusher.files(_files(tmp_path / "a", SYNCFS_MIN))
    assert fsynced == [SYNCFS_MIN]


def test_a_failing_syncfs_falls_back_to_fsync(
    tmp_path: Path, fsynced: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # EIO from write-back cannot be produced on demand; a syncfs that reports failure can.
    monkeypatch.setattr(_durable, "_syncfs", lambda fd: -1)
    with Flusher([tmp_path]) as flusher:
        flusher.files(_files(tmp_path / "a", SYNCFS_MIN))
    assert fsynced == [SYNCFS_MIN]


def test_without_syncfs_every_file_is_fsynced(
    tmp_path: Path, fsynced: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_durable, "_syncfs", None)
    with Flusher([tmp_path]) as flusher:
        flusher.files(_files(tmp_path / "a", SYNCFS_MIN))
    assert fsynced == [SYNCFS_MIN]
