"""Savepoints and restore: exact materialization, uncertainty, the stat cache, a property test."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from custody_helpers import DELIVERY, make_site, preview, settle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import DeliveryId, ErrorCode, ExecsysError, SavepointId
from execution_system.custody import FileCustody

Workspace = Callable[[], Path]


def _picture(root: Path) -> dict[str, tuple[str, int, bytes]]:
    """Everything observable about a tree: kind, mode and content of every path."""
    seen: dict[str, tuple[str, int, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            st_ = path.lstat()
            if stat.S_ISLNK(st_.st_mode):
                seen[rel] = ("link", 0, os.readlink(path).encode())
            elif stat.S_ISDIR(st_.st_mode):
                seen[rel] = ("dir", 0, b"")
            else:
                seen[rel] = ("file", stat.S_IMODE(st_.st_mode), path.read_bytes())
    return seen


def _blob(custody: FileCustody, digest: str) -> Path:
    # The documented blob layout: blobs/<first 2 hex>/<remaining 62 hex>.
    hexpart = digest.removeprefix("sha256:")
    return custody.root / "blobs" / hexpart[:2] / hexpart[2:]


def test_restore_materializes_exactly_the_savepoint(
    custody: FileCustody, opened: Workspace, seed: Path
) -> None:
    base = custody.head(DELIVERY)
    ws = opened()
    (ws / "src" / "app.py").write_text("edited\n")
    (ws / "src" / "run.sh").chmod(0o600)
    (ws / "README.md").unlink()
    (ws / "src" / "readme-link").unlink()
    (ws / "src" / "readme-link").write_text("now a file\n")
    (ws / "empty" / "nested").mkdir(parents=True)
    (ws / "docs").rename(ws / "docs-moved")
    (ws / "docs").write_text("a file where a directory was\n")
    (ws / "extra-link").symlink_to("src")
    os.mkfifo(ws / "fifo")
    result = custody.restore(DELIVERY, base)
    assert result.confirmed, result.differences
    assert result.savepoint == base
    assert _picture(ws) == _picture(seed)
    assert custody.head(DELIVERY) == base
    assert custody.snapshot(DELIVERY, full_verify=True).savepoint == base


def test_restore_moves_the_head_back_and_forth(custody: FileCustody, opened: Workspace) -> None:
    base = custody.head(DELIVERY)
    cap = custody.issue(make_site(), "write")
    (opened() / "src" / "app.py").write_text("v2\n")
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.savepoint is not None
    custody.advance(DELIVERY, verdict.savepoint)
    assert custody.restore(DELIVERY, base).confirmed
    assert custody.head(DELIVERY) == base
    assert (opened() / "src" / "app.py").read_text() == "print('app')\n"
    assert custody.restore(DELIVERY, verdict.savepoint).confirmed
    assert custody.head(DELIVERY) == verdict.savepoint
    assert (opened() / "src" / "app.py").read_text() == "v2\n"


def test_restore_with_a_corrupt_blob_is_uncertain_and_keeps_the_head(
    custody: FileCustody, opened: Workspace
) -> None:
    base = custody.head(DELIVERY)
    cap = custody.issue(make_site(), "write")
    (opened() / "src" / "app.py").write_text("v2\n")
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.savepoint is not None
    custody.advance(DELIVERY, verdict.savepoint)
    entry = next(e for e in custody.manifest(DELIVERY, base) if e.path == "src/app.py")
    blob = _blob(custody, entry.sha256)
    blob.chmod(0o644)
    blob.write_bytes(b"bit rot\n")
    result = custody.restore(DELIVERY, base)
    assert not result.confirmed
    assert any(d.startswith("src/app.py") for d in result.differences)
    assert custody.head(DELIVERY) == verdict.savepoint


def test_restore_with_a_missing_blob_is_uncertain(custody: FileCustody, opened: Workspace) -> None:
    base = custody.head(DELIVERY)
    entry = next(e for e in custody.manifest(DELIVERY, base) if e.path == "docs/guide.md")
    _blob(custody, entry.sha256).unlink()
    (opened() / "docs" / "guide.md").unlink()
    result = custody.restore(DELIVERY, base)
    assert not result.confirmed
    assert any("docs/guide.md" in d for d in result.differences)


def test_restore_with_a_tampered_manifest_is_uncertain_and_touches_nothing(
    custody: FileCustody, opened: Workspace, clock: object
) -> None:
    base = custody.head(DELIVERY)
    (opened() / "keep-me").write_text("x\n")
    manifest = custody.root / "deliveries" / DELIVERY / "manifests" / base.removeprefix("sha256:")
    manifest.write_bytes(manifest.read_bytes().replace(b'"mode":420', b'"mode":511', 1))
    fresh = FileCustody(custody.root)  # no in-memory copy of the manifest
    result = fresh.restore(DELIVERY, base)
    assert not result.confirmed
    assert result.differences[0].startswith("manifest:")
    assert (opened() / "keep-me").exists()


def test_unknown_savepoints_are_refused(custody: FileCustody, opened: Workspace) -> None:
    unknown = SavepointId("sha256:" + "0" * 64)
    for call in (custody.restore, custody.advance):
        with pytest.raises(ExecsysError) as caught:
            call(DELIVERY, unknown)
        assert caught.value.code is ErrorCode.CUSTODY_SAVEPOINT_UNKNOWN
    # A savepoint of another delivery is unknown to this one.
    custody.open(DeliveryId("d-other"))
    (Path(custody.workspace(DeliveryId("d-other"))) / "f").write_text("other\n")
    theirs = custody.snapshot(DeliveryId("d-other")).savepoint
    with pytest.raises(ExecsysError):
        custody.advance(DELIVERY, theirs)


def test_stat_cache_rereads_only_changed_files(custody: FileCustody) -> None:
    custody.open(DELIVERY)
    ws = Path(custody.workspace(DELIVERY))
    for index in range(200):
        folder = ws / f"dir{index % 10}"
        folder.mkdir(exist_ok=True)
        (folder / f"file{index}.txt").write_bytes(os.urandom(100 + index))
    settle()
    first = custody.snapshot(DELIVERY)
    assert (first.files, first.hashed_files) == (200, 200)
    settle()
    again = custody.snapshot(DELIVERY)
    assert again.hashed_files == 0
    assert again.savepoint == first.savepoint
    for index in range(0, 200, 20):
        (ws / f"dir{index % 10}" / f"file{index}.txt").write_bytes(b"changed")
    settle()
    incremental = custody.snapshot(DELIVERY)
    assert incremental.hashed_files == 10
    assert incremental.savepoint != first.savepoint
    full = custody.snapshot(DELIVERY, full_verify=True)
    assert full.hashed_files == 200
    assert full.savepoint == incremental.savepoint


def test_same_size_rewrite_is_detected_despite_the_cache(custody: FileCustody) -> None:
    custody.open(DELIVERY)
    target = Path(custody.workspace(DELIVERY)) / "f.txt"
    target.write_bytes(b"aaaa")
    settle()
    first = custody.snapshot(DELIVERY).savepoint
    before = target.stat()
    target.write_bytes(b"bbbb")
    # Even with mtime forced back, ctime (which nobody can set) changes.
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert custody.snapshot(DELIVERY).savepoint != first


# --- property: random trees, random edits, restore(base) gives back the same tree ----------

_NAMES = st.sampled_from(["a", "b", "c.txt", "d", "é"])
_PATHS = st.lists(_NAMES, min_size=1, max_size=3).map("/".join)
_MODES = st.sampled_from([0o644, 0o600, 0o755, 0o444, 0o700])
_TREES = st.dictionaries(_PATHS, st.tuples(st.binary(max_size=48), _MODES), max_size=8).filter(
    lambda tree: not any(q.startswith(p + "/") for p in tree for q in tree)
)
_EDITS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), _PATHS, st.binary(max_size=24)),
        st.tuples(st.just("delete"), _PATHS),
        st.tuples(st.just("chmod"), _PATHS, _MODES),
        st.tuples(st.just("mkdir"), _PATHS),
        st.tuples(st.just("symlink"), _PATHS, _NAMES),
        st.tuples(st.just("rmtree"), _PATHS),
    ),
    max_size=8,
)


def _apply(ws: Path, edit: tuple[object, ...]) -> None:
    kind, rel = edit[0], str(edit[1])
    path = ws / rel
    try:
        if kind == "write":
            path.parent.mkdir(parents=True, exist_ok=True)
            data = edit[2]
            assert isinstance(data, bytes)
            path.write_bytes(data)
        elif kind == "delete":
            path.unlink()
        elif kind == "chmod":
            mode = edit[2]
            assert isinstance(mode, int)
            if not path.is_symlink():
                path.chmod(mode)
        elif kind == "mkdir":
            path.mkdir(parents=True)
        elif kind == "symlink":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(str(edit[2]))
        elif kind == "rmtree":
            for child in sorted(path.rglob("*"), reverse=True):
                child.rmdir() if child.is_dir() and not child.is_symlink() else child.unlink()
            path.rmdir()
    except OSError:
        pass  # the edit conflicts with the current tree: skip it


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=_TREES, edits=_EDITS)
def test_restore_after_random_edits_gives_back_the_identical_tree(
    tree: dict[str, tuple[bytes, int]], edits: list[tuple[object, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        seed = Path(tmp) / "seed"
        seed.mkdir()
        for rel, (data, mode) in tree.items():
            (seed / rel).parent.mkdir(parents=True, exist_ok=True)
            (seed / rel).write_bytes(data)
            (seed / rel).chmod(mode)
        custody = FileCustody(Path(tmp) / "custody")
        base = custody.open(DELIVERY, seed=str(seed))
        ws = Path(custody.workspace(DELIVERY))
        for edit in edits:
            _apply(ws, edit)
        result = custody.restore(DELIVERY, base)
        assert result.confirmed, result.differences
        assert _picture(ws) == _picture(seed)
        assert custody.snapshot(DELIVERY, full_verify=True).savepoint == base
