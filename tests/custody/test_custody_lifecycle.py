"""Opening, seeding, durable heads, retirement and the start-up head comparison."""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from custody_helpers import DELIVERY, make_site, preview

import execution_system.custody as custody_package
from contracts import Custody, DeliveryId, ErrorCode, ExecsysError, SavepointId
from execution_system.custody import FileCustody, compare_heads

Workspace = Callable[[], Path]


def test_exported_names() -> None:
    assert sorted(custody_package.__all__) == [
        "DEFAULT_EXCLUDED",
        "FileCustody",
        "PruneReport",
        "SnapshotReport",
        "compare_heads",
        "protected_by",
    ]


def _protocol_methods() -> list[str]:
    return [name for name, v in vars(Custody).items() if callable(v) and not name.startswith("_")]


@pytest.mark.parametrize("method", _protocol_methods())
def test_file_custody_accepts_every_call_the_protocol_allows(method: str) -> None:
    """Each protocol parameter is present with its name, kind, default and type, in order.

    It may add keyword-only parameters with defaults (``full_verify``); anything
    else would break a caller written against the protocol.
    """
    declared = inspect.signature(getattr(Custody, method))
    actual = inspect.signature(getattr(FileCustody, method))
    expected = list(declared.parameters.values())
    given = list(actual.parameters.values())
    assert given[: len(expected)] == expected, f"FileCustody.{method}{actual}"
    for extra in given[len(expected) :]:
        assert extra.kind is inspect.Parameter.KEYWORD_ONLY, extra
        assert extra.default is not inspect.Parameter.empty, extra
    assert actual.return_annotation == declared.return_annotation


def test_the_conformance_check_covers_the_whole_protocol() -> None:
    assert _protocol_methods() == [
        "open",
        "workspace",
        "head",
        "issue",
        "validate",
        "advance",
        "restore",
        "savepoints",
        "retire",
    ]


def test_open_without_seed_records_the_empty_tree(custody: FileCustody) -> None:
    head = custody.open(DELIVERY)
    assert Path(custody.workspace(DELIVERY)).is_dir()
    assert custody.head(DELIVERY) == head
    assert custody.manifest(DELIVERY, head) == ()
    [info] = custody.savepoints(DELIVERY)
    assert (info.savepoint, info.files, info.bytes) == (head, 0, 0)


def test_open_copies_the_seed_and_is_idempotent(
    custody: FileCustody, seed: Path, tmp_path: Path
) -> None:
    head = custody.open(DELIVERY, seed=str(seed))
    ws = Path(custody.workspace(DELIVERY))
    assert (ws / "src" / "app.py").read_text() == "print('app')\n"
    assert (ws / "src" / "run.sh").stat().st_mode & 0o777 == 0o755
    assert os.readlink(ws / "src" / "readme-link") == "../README.md"
    (ws / "README.md").write_text("work in progress\n")
    other_seed = tmp_path / "other-seed"
    other_seed.mkdir()
    assert custody.open(DELIVERY, seed=str(other_seed)) == head
    assert (ws / "README.md").read_text() == "work in progress\n"
    assert len(custody.savepoints(DELIVERY)) == 1


def test_equal_trees_have_equal_savepoints_across_deliveries(
    custody: FileCustody, seed: Path
) -> None:
    assert custody.open(DELIVERY, seed=str(seed)) == custody.open(
        DeliveryId("d-twin"), seed=str(seed)
    )


@pytest.mark.parametrize("kind", ["escaping-link", "absolute-link", "fifo", "not-a-directory"])
def test_unsafe_seeds_are_refused(custody: FileCustody, seed: Path, kind: str) -> None:
    if kind == "escaping-link":
        (seed / "src" / "out").symlink_to("../../outside")
    elif kind == "absolute-link":
        (seed / "passwd").symlink_to("/etc/passwd")
    elif kind == "fifo":
        os.mkfifo(seed / "docs" / "pipe")
    else:
        seed = seed / "README.md"
    with pytest.raises(ExecsysError) as caught:
        custody.open(DELIVERY, seed=str(seed))
    assert caught.value.code is ErrorCode.CUSTODY_SEED_INVALID
    # Nothing half-made is left behind: a later open with a good seed works.
    assert not Path(custody.workspace(DELIVERY)).exists()
    assert not (custody.root / "deliveries" / DELIVERY).exists()
    with pytest.raises(ExecsysError):
        custody.head(DELIVERY)


@pytest.mark.parametrize("delivery", ["../escape", "a/b", "", ".", "..", "-x", "x" * 200])
def test_unsafe_delivery_ids_are_refused(custody: FileCustody, delivery: str) -> None:
    with pytest.raises(ExecsysError) as caught:
        custody.open(DeliveryId(delivery))
    assert caught.value.code is ErrorCode.CUSTODY_PATH_TRAVERSAL


def test_head_is_durable_and_read_independently(
    custody: FileCustody, opened: Workspace, clock: object
) -> None:
    cap = custody.issue(make_site(), "write")
    (opened() / "new.txt").write_text("new\n")
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.savepoint is not None
    custody.advance(DELIVERY, verdict.savepoint)
    restarted = FileCustody(custody.root)
    assert restarted.head(DELIVERY) == verdict.savepoint
    assert [i.savepoint for i in restarted.savepoints(DELIVERY)][-1] == verdict.savepoint


def test_head_of_unknown_delivery_is_refused(custody: FileCustody) -> None:
    with pytest.raises(ExecsysError) as caught:
        custody.head(DeliveryId("d-unknown"))
    assert caught.value.code is ErrorCode.CUSTODY_WORKSPACE_UNKNOWN


def _blob_count(custody: FileCustody) -> int:
    blobs = custody.root / "blobs"
    return sum(1 for p in blobs.rglob("*") if p.is_file() and ".staging" not in p.parts)


def test_retire_deletes_workspace_and_unshared_blobs_only(custody: FileCustody, seed: Path) -> None:
    custody.open(DELIVERY, seed=str(seed))
    twin = DeliveryId("d-twin")
    custody.open(twin, seed=str(seed))
    (Path(custody.workspace(DELIVERY)) / "mine.txt").write_text("only mine\n")
    custody.snapshot(DELIVERY)
    shared = _blob_count(custody)
    custody.retire(DELIVERY)
    assert not Path(custody.workspace(DELIVERY)).exists()
    assert _blob_count(custody) == shared - 1
    with pytest.raises(ExecsysError):
        custody.head(DELIVERY)
    custody.retire(DELIVERY)  # idempotent
    assert custody.restore(twin, custody.head(twin)).confirmed
    custody.retire(twin)
    assert _blob_count(custody) == 0


def test_release_deletes_only_the_workspace_and_restore_brings_it_back(
    custody: FileCustody, seed: Path
) -> None:
    custody.open(DELIVERY, seed=str(seed))
    workspace = Path(custody.workspace(DELIVERY))
    (workspace / "kept.txt").write_text("in a savepoint\n")
    saved = custody.snapshot(DELIVERY).savepoint
    blobs = _blob_count(custody)
    assert custody.release(DELIVERY) is True
    assert not workspace.exists()
    assert custody.release(DELIVERY) is False  # idempotent
    assert _blob_count(custody) == blobs
    exported = seed.parent / "exported"
    custody.export(DELIVERY, saved, exported)
    assert (exported / "kept.txt").read_text() == "in a savepoint\n"
    assert custody.restore(DELIVERY, saved).confirmed
    assert (workspace / "kept.txt").read_text() == "in a savepoint\n"


def test_retire_removes_blobs_left_by_refused_validations(
    custody: FileCustody, opened: Workspace
) -> None:
    cap = custody.issue(make_site(), "read")
    (opened() / "big.bin").write_bytes(os.urandom(5000))
    assert not custody.validate(preview(cap.token, make_site())).accepted
    custody.retire(DELIVERY)
    assert _blob_count(custody) == 0


def test_compare_heads() -> None:
    one = SavepointId("sha256:" + "1" * 64)
    two = SavepointId("sha256:" + "2" * 64)
    assert compare_heads(one, one) is None
    assert compare_heads(None, None) is None
    mismatch = compare_heads(two, one)
    assert mismatch is not None
    assert one in mismatch
    assert two in mismatch
    assert compare_heads(None, one) is not None
    assert compare_heads(one, None) is not None


def test_retire_running_alongside_commits_of_other_deliveries_loses_no_blob(
    custody: FileCustody, seed: Path
) -> None:
    busy = DeliveryId("d-busy")
    for delivery in (busy, DeliveryId("d-retired")):
        custody.open(delivery, seed=str(seed))
    ws = Path(custody.workspace(busy))
    errors: list[BaseException] = []

    def commits() -> None:
        try:
            for round_ in range(15):
                site = make_site(busy, attempt=round_ + 1)
                cap = custody.issue(site, "write")
                (ws / f"round{round_}.txt").write_text(f"round {round_}\n")
                verdict = custody.validate(preview(cap.token, site))
                assert verdict.savepoint is not None, verdict
                custody.advance(busy, verdict.savepoint)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    worker = threading.Thread(target=commits)
    worker.start()
    custody.retire(DeliveryId("d-retired"))
    worker.join()
    assert not errors
    for info in custody.savepoints(busy):
        assert custody.restore(busy, info.savepoint, full_verify=True).confirmed
