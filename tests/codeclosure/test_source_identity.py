"""The candidate's source identity: the check's copy and the freeze's second look.

A check binds its evidence to the digest of the copy it ran in, taken from the
bytes it wrote; the freeze re-reads only files whose stat rows moved. Both
must give exactly what a full read (:func:`source_digest`) gives, and the
freeze must see every change made during its window.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from execution_system.codeclosure import _source
from execution_system.codeclosure._source import copy_source, source_digest, stable_digest


def _tree(root: Path) -> Path:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "a.py").write_text("A = 1\n")
    (root / "src" / "pkg" / "b.py").write_text("B = 2\n")
    tool = root / "run.sh"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    (root / "link.py").symlink_to("src/pkg/a.py")
    (root / "pkgdir").symlink_to("src/pkg")
    for excluded in (".git", ".venv", "src/pkg/__pycache__"):
        (root / excluded).mkdir(parents=True)
        (root / excluded / "x").write_text("left out\n")
    for i in range(80):  # enough files for the threaded copy
        (root / "src" / f"m{i:02d}.py").write_text(f"V = {i}\n")
    return root


def test_the_copy_holds_the_tree_and_its_digest_is_a_full_reads(tmp_path):
    tree = _tree(tmp_path / "tree")
    copy = tmp_path / "copy"
    digest, count = copy_source(tree, copy)
    assert (digest, count) == source_digest(tree) == source_digest(copy)
    assert (copy / "src" / "pkg" / "b.py").read_text() == "B = 2\n"
    assert os.stat(copy / "run.sh").st_mode & 0o777 == 0o755
    assert os.readlink(copy / "link.py") == "src/pkg/a.py"
    assert os.readlink(copy / "pkgdir") == "src/pkg"
    for excluded in (".git", ".venv", "src/pkg/__pycache__"):
        assert not (copy / excluded).exists(), excluded


def test_a_copy_of_a_different_tree_has_another_digest(tmp_path):
    tree = _tree(tmp_path / "tree")
    before, _ = copy_source(tree, tmp_path / "one")
    (tree / "src" / "pkg" / "a.py").chmod(0o700)
    after, _ = copy_source(tree, tmp_path / "two")
    assert after != before
    assert after == source_digest(tree)[0]


_sleep = time.sleep


def _settle() -> None:
    # Rows changed within RACY_NS of the first walk are always re-read; let them age.
    _sleep(2 * _source.RACY_NS / 1e9)


def test_an_unchanged_tree_is_stable_with_the_full_digest(tmp_path):
    tree = _tree(tmp_path / "tree")
    _settle()
    assert stable_digest(tree, 0.0) == source_digest(tree)


def _during_window(monkeypatch: pytest.MonkeyPatch, change) -> None:
    monkeypatch.setattr(_source.time, "sleep", lambda _s: change())


def test_an_in_place_rewrite_with_its_mtime_put_back_is_seen(tmp_path, monkeypatch):
    tree = _tree(tmp_path / "tree")
    target = tree / "src" / "pkg" / "a.py"
    _settle()
    old = target.stat()

    def rewrite() -> None:
        with open(target, "r+b") as handle:  # same size, same inode
            handle.write(b"A = 9\n")
        os.utime(target, ns=(old.st_atime_ns, old.st_mtime_ns))

    _during_window(monkeypatch, rewrite)
    digest, _ = stable_digest(tree, 0.2)
    assert digest is None


def test_a_replaced_file_an_added_file_and_a_mode_change_are_seen(tmp_path, monkeypatch):
    changes = {
        "replaced": lambda t: os.replace(_write(t / "new", "B = 3\n"), t / "src" / "pkg" / "b.py"),
        "added": lambda t: _write(t / "src" / "c.py", "C = 3\n"),
        "removed": lambda t: (t / "src" / "m00.py").unlink(),
        "mode": lambda t: (t / "run.sh").chmod(0o700),
    }
    for name, change in changes.items():
        tree = _tree(tmp_path / name)
        _settle()
        _during_window(monkeypatch, lambda c=change, t=tree: c(t))
        digest, _ = stable_digest(tree, 0.2)
        assert digest is None, name


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
