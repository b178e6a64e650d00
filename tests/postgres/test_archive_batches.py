"""The custody archive sends a large savepoint's contents in bounded batches.

A savepoint's new contents are read from local custody one by one and stored
in transactions of at most ``BATCH_BYTES`` each; the last batch rides with the
savepoint itself, so a small savepoint costs no extra transaction. Another
custody then brings the whole tree over, every content checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from contracts import DeliveryId
from execution_system.custody import FileCustody
from host import _archive
from host._archive import ArchivedCustody
from host.storage import StorageTx
from host.storage.postgres import PostgresStorage

D = DeliveryId("d-archive-batches")


class _Counting:
    """The store's archive, counting the batches and bytes each call carries."""

    def __init__(self, archive: object) -> None:
        self.archive = archive
        self.batches: list[int] = []
        self.with_savepoint: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.archive, name)

    def put_contents(self, tx: StorageTx, delivery: str, blobs: Mapping[str, bytes]) -> None:
        self.batches.append(sum(map(len, blobs.values())))
        self.archive.put_contents(tx, delivery, blobs)  # type: ignore[attr-defined]

    def put(self, tx: StorageTx, delivery: str, savepoint: str, entry: object, refs: object,
            blobs: Mapping[str, bytes]) -> list[str]:  # fmt: skip
        self.with_savepoint.append(sum(map(len, blobs.values())))
        found: list[str] = self.archive.put(tx, delivery, savepoint, entry, refs, blobs)  # type: ignore[attr-defined]
        return found


def _custodies(
    tmp_path: Path, store: PostgresStorage
) -> tuple[FileCustody, ArchivedCustody, ArchivedCustody, _Counting]:
    assert store.archive is not None
    counting = _Counting(store.archive)

    def fenced(_delivery: str) -> AbstractContextManager[StorageTx]:
        return store.transaction()

    here = FileCustody(tmp_path / "here")
    local = ArchivedCustody(here, counting, fenced)  # type: ignore[arg-type]
    remote = ArchivedCustody(FileCustody(tmp_path / "there"), store.archive, fenced)
    return here, local, remote, counting


def test_a_large_savepoint_travels_in_bounded_batches(
    tmp_path: Path, store: PostgresStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = tmp_path / "seed"
    seed.mkdir()
    for n in range(9):
        (seed / f"f{n}.bin").write_bytes(bytes([n]) * 4000)
    monkeypatch.setattr(_archive, "BATCH_BYTES", 10_000)  # two 4,000-byte contents a batch
    here, local, remote, counting = _custodies(tmp_path, store)
    head = here.open(D, str(seed))
    local.advance(D, head)
    assert counting.batches == [8000, 8000, 8000, 8000], "four batches on their own"
    assert counting.with_savepoint == [0, 4000], "the last batch rides with the savepoint"
    remote.prepare(D)
    workspace = Path(remote.workspace(D))
    assert sorted(p.name for p in workspace.iterdir()) == [f"f{n}.bin" for n in range(9)]
    assert (workspace / "f8.bin").read_bytes() == bytes([8]) * 4000


def test_a_small_savepoint_costs_no_extra_transaction(
    tmp_path: Path, store: PostgresStorage
) -> None:
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "a.txt").write_text("a\n")
    here, local, remote, counting = _custodies(tmp_path, store)
    local.advance(D, here.open(D, str(seed)))
    assert counting.batches == []
    assert counting.with_savepoint == [0, 2]
    remote.prepare(D)
    assert (Path(remote.workspace(D)) / "a.txt").read_text() == "a\n"
