"""Savepoints copied between two custodies (two machines' data folders)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from contracts import DeliveryId, ErrorCode, ExecsysError, SavepointId
from execution_system.custody import FileCustody

D = DeliveryId("d-transfer")


def seeded(tmp_path: Path) -> tuple[FileCustody, SavepointId]:
    seed = tmp_path / "seed"
    (seed / "src").mkdir(parents=True)
    (seed / "src" / "a.py").write_text("print('a')\n")
    (seed / "big.bin").write_bytes(bytes(range(256)) * 4000)
    (seed / "node_modules").mkdir()
    (seed / "node_modules" / "x.js").write_text("x")
    custody = FileCustody(tmp_path / "one", exclude=frozenset({"node_modules"}))
    return custody, custody.open(D, str(seed))


def test_an_imported_savepoint_restores_the_same_tree(tmp_path: Path) -> None:
    one, head = seeded(tmp_path)
    exported = one.export_savepoint(D, head)
    other = FileCustody(tmp_path / "two")
    assert not other.has_savepoint(D, head)
    asked: list[list[str]] = []

    def fetch(digests: Sequence[str]) -> Mapping[str, bytes]:
        asked.append(list(digests))
        return one.read_blobs(digests)

    other.import_savepoint(D, exported, fetch)
    assert other.has_savepoint(D, head)
    assert other.excluded(D) == ("node_modules",)  # the delivery's record came along
    restored = other.restore(D, head)
    assert restored.confirmed and other.head(D) == head
    workspace = Path(other.workspace(D))
    assert (workspace / "src" / "a.py").read_text() == "print('a')\n"
    assert not (workspace / "node_modules").exists()
    # A second import asks for nothing: every content is stored.
    other.import_savepoint(D, exported, fetch)
    assert sum(len(run) for run in asked) == 2


def test_a_content_that_is_not_its_digest_is_refused_and_nothing_is_recorded(
    tmp_path: Path,
) -> None:
    one, head = seeded(tmp_path)
    exported = one.export_savepoint(D, head)
    other = FileCustody(tmp_path / "two")

    def forged(digests: Sequence[str]) -> Mapping[str, bytes]:
        return {digest: b"not the content" for digest in digests}

    with pytest.raises(ExecsysError) as caught:
        other.import_savepoint(D, exported, forged)
    assert caught.value.code is ErrorCode.CUSTODY_REJECTED
    assert not other.has_savepoint(D, head)
    assert other.missing_blobs(list(exported.digests)) == list(exported.digests)


def test_a_manifest_that_is_not_the_savepoint_is_refused(tmp_path: Path) -> None:
    one, head = seeded(tmp_path)
    exported = one.export_savepoint(D, head)
    other = FileCustody(tmp_path / "two")
    tampered = exported._replace(manifest=exported.manifest.replace(b"a.py", b"b.py"))
    with pytest.raises(ExecsysError) as caught:
        other.import_savepoint(D, tampered, one.read_blobs)
    assert caught.value.code is ErrorCode.CUSTODY_REJECTED
    assert not other.has_savepoint(D, head)


def test_contents_come_in_runs_of_bounded_size_and_a_late_forgery_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from execution_system.custody import _transfer

    seed = tmp_path / "seed"
    seed.mkdir()
    for n in range(10):
        (seed / f"f{n}.bin").write_bytes(bytes([n]) * 3000)
    one = FileCustody(tmp_path / "one")
    head = one.open(D, str(seed))
    exported = one.export_savepoint(D, head)
    monkeypatch.setattr(_transfer, "FETCH_BYTES", 7000)  # two 3,000-byte contents a run
    asked: list[list[str]] = []

    def forged_late(digests: Sequence[str]) -> Mapping[str, bytes]:
        asked.append(list(digests))
        found = dict(one.read_blobs(digests))
        if len(asked) == 4:
            found[digests[0]] = b"not the content"
        return found

    other = FileCustody(tmp_path / "two")
    with pytest.raises(ExecsysError) as caught:
        other.import_savepoint(D, exported, forged_late)
    assert caught.value.code is ErrorCode.CUSTODY_REJECTED
    assert [len(run) for run in asked] == [2, 2, 2, 2], "each run asked for after the last"
    assert not other.has_savepoint(D, head)
    assert other.missing_blobs(list(exported.digests)) == list(exported.digests)
    staging = tmp_path / "two" / "blobs" / ".staging"
    assert staging.is_dir(), "the first runs were staged"
    assert not any(staging.iterdir()), "nothing staged is left"

    def fetch(digests: Sequence[str]) -> Mapping[str, bytes]:
        asked.append(list(digests))
        return one.read_blobs(digests)

    asked.clear()
    other.import_savepoint(D, exported, fetch)
    assert [len(run) for run in asked] == [2, 2, 2, 2, 2]
    assert other.restore(D, head).confirmed
