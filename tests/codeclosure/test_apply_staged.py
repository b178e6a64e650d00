"""``goal apply`` writes nothing unless it can write everything (``apply_to`` on real folders)."""

from __future__ import annotations

import errno
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from contracts import ErrorCode, ExecsysError
from execution_system.codeclosure import _export
from execution_system.codeclosure._export import STAGED, apply_to
from execution_system.codeclosure._source import source_digest
from tests.codeclosure.helpers import snapshot


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path, Path, dict[str, Any]]:
    base = _tree(tmp_path / "base", {"a.py": "a = 1\n", "gone.py": "x\n", "pkg/b.py": "b\n"})
    after = _tree(tmp_path / "after", {"a.py": "a = 2\n", "pkg/b.py": "b\n", "new/c.py": "c\n"})
    target = tmp_path / "target"
    shutil.copytree(base, target)
    facts = {"base": source_digest(base)[0], "frozen": source_digest(after)[0]}
    return base, after, target, facts


def test_a_failure_while_copying_leaves_the_folder_as_it_was(
    trees: tuple[Path, Path, Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, after, target, facts = trees
    before = snapshot(target)
    real_copy = shutil.copy2
    calls = []

    def copy_then_fill_the_disk(source: Any, dest: Any) -> Any:
        calls.append(dest)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_copy(source, dest)

    monkeypatch.setattr(_export.shutil, "copy2", copy_then_fill_the_disk)
    with pytest.raises(ExecsysError) as refused:
        apply_to(target, base, after, facts)
    assert refused.value.code is ErrorCode.FILE_NOT_WRITABLE
    assert "No space left on device" in refused.value.message
    assert snapshot(target) == before
    assert not (target / "new").exists(), "folders it made are removed again"
    assert not list(target.rglob(f"*{STAGED}"))


def test_the_accepted_tree_whole_then_nothing_more(
    trees: tuple[Path, Path, Path, dict[str, Any]],
) -> None:
    base, after, target, facts = trees
    (target / f".a.py{STAGED}").write_text("left by an interrupted apply\n")
    assert apply_to(target, base, after, facts) == ["a.py", "gone.py", "new/c.py"]
    assert snapshot(target) == snapshot(after)
    assert apply_to(target, base, after, facts) == [], "already the accepted tree"


_KILLED_BETWEEN_RENAMES = """
import os, signal, sys
from pathlib import Path
from execution_system.codeclosure import _export

target, base, after, frozen, base_digest = sys.argv[1:]
renamed = []
real_replace = os.replace

def replace_then_die(source, dest):
    real_replace(source, dest)
    renamed.append(dest)
    if len(renamed) == 1:
        os.kill(os.getpid(), signal.SIGKILL)

_export.os.replace = replace_then_die
_export.apply_to(Path(target), Path(base), Path(after), {"base": base_digest, "frozen": frozen})
"""


def test_an_apply_killed_between_its_renames_is_completed_by_the_next(
    trees: tuple[Path, Path, Path, dict[str, Any]],
) -> None:
    base, after, target, facts = trees
    args = [str(target), str(base), str(after), facts["frozen"], facts["base"]]
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_BETWEEN_RENAMES, *args],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (target / "a.py").read_text() == "a = 2\n", "one file renamed into place"
    assert (target / "gone.py").exists(), "the rest not yet"
    assert apply_to(target, base, after, facts) == ["a.py", "gone.py", "new/c.py"]
    assert snapshot(target) == snapshot(after)
    assert not list(target.rglob(f"*{STAGED}"))


def test_a_part_applied_folder_changed_besides_is_still_refused(
    trees: tuple[Path, Path, Path, dict[str, Any]],
) -> None:
    base, after, target, facts = trees
    (target / "a.py").write_text("a = 2\n")  # as accepted
    (target / "pkg/b.py").write_text("edited by hand\n")  # as neither
    before = snapshot(target)
    with pytest.raises(ExecsysError) as refused:
        apply_to(target, base, after, facts)
    assert refused.value.code is ErrorCode.GOAL_MANIFEST_MISMATCH
    assert snapshot(target) == before
