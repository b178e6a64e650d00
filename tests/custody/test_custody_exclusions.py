"""Excluded folders (.git, venvs, caches) are in no seed, snapshot, digest or restore.

The set is recorded with the delivery when it is opened, so every later scan
of that delivery, by any instance, leaves out the same names.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from custody_helpers import DELIVERY, Clock, make_site, preview

from contracts import DeliveryId, ErrorCode, ExecsysError
from execution_system.custody import DEFAULT_EXCLUDED, FileCustody


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A real project's layout: its own .git, a venv with absolute symlinks, caches."""
    root = tmp_path / "project"
    (root / "src" / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "src" / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (root / "src" / "pkg" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\x00pyc")
    (root / ".git" / "objects").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").symlink_to("/usr/bin/python3")
    (root / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    return root


def _paths(custody: FileCustody, delivery: DeliveryId = DELIVERY) -> list[str]:
    return [entry.path for entry in custody.manifest(delivery, custody.head(delivery))]


def test_a_project_with_git_and_venv_seeds_without_them(
    custody: FileCustody, project: Path
) -> None:
    custody.open(DELIVERY, seed=str(project))
    assert _paths(custody) == ["pyproject.toml", "src/pkg/__init__.py"]
    assert custody.excluded(DELIVERY) == tuple(sorted(DEFAULT_EXCLUDED))
    workspace = Path(custody.workspace(DELIVERY))
    assert not (workspace / ".git").exists()


def test_writes_under_excluded_folders_are_no_change(custody: FileCustody, project: Path) -> None:
    base = custody.open(DELIVERY, seed=str(project))
    workspace = Path(custody.workspace(DELIVERY))
    site = make_site()
    cap = custody.issue(site, "read")
    # What running the tests leaves behind, and a venv made inside the workspace.
    (workspace / "src" / "pkg" / "__pycache__").mkdir()
    (workspace / "src" / "pkg" / "__pycache__" / "x.pyc").write_bytes(b"pyc")
    (workspace / ".pytest_cache").mkdir()
    (workspace / ".pytest_cache" / "v").write_text("cache\n")
    (workspace / ".venv").symlink_to("/usr")  # absolute, but excluded: not refused
    verdict = custody.validate(preview(cap.token, site))
    assert verdict.accepted, verdict
    assert verdict.savepoint == base
    assert verdict.changed == ()


def test_restore_leaves_excluded_folders_alone(custody: FileCustody, project: Path) -> None:
    base = custody.open(DELIVERY, seed=str(project))
    workspace = Path(custody.workspace(DELIVERY))
    (workspace / ".venv" / "lib").mkdir(parents=True)
    (workspace / ".venv" / "lib" / "site.py").write_text("# installed\n")
    (workspace / "src" / "pkg" / "__init__.py").write_text("VALUE = 2\n")
    (workspace / "stray.txt").write_text("extra\n")
    result = custody.restore(DELIVERY, base)
    assert result.confirmed, result
    assert (workspace / ".venv" / "lib" / "site.py").read_text() == "# installed\n"
    assert (workspace / "src" / "pkg" / "__init__.py").read_text() == "VALUE = 1\n"
    assert not (workspace / "stray.txt").exists()


def test_the_recorded_set_applies_whatever_a_later_instance_is_given(
    tmp_path: Path, clock: Clock
) -> None:
    root = tmp_path / "custody"
    first = FileCustody(root, clock=clock, exclude=frozenset({"build"}))
    base = first.open(DELIVERY)
    later = FileCustody(root, clock=clock)  # the default set
    assert later.excluded(DELIVERY) == ("build",)
    workspace = Path(later.workspace(DELIVERY))
    (workspace / "build").mkdir()
    (workspace / "build" / "out.o").write_bytes(b"obj")
    site = make_site()
    verdict = later.validate(preview(later.issue(site, "read").token, site))
    assert verdict.accepted
    assert verdict.savepoint == base
    # __pycache__ is not in this delivery's recorded set: it is a change like any other.
    (workspace / "__pycache__").mkdir()
    (workspace / "__pycache__" / "m.pyc").write_bytes(b"pyc")
    site = make_site(attempt=2)
    verdict = later.validate(preview(later.issue(site, "read").token, site))
    assert verdict.code is ErrorCode.CUSTODY_WRITE_UNDER_READ
    assert verdict.path == "__pycache__/m.pyc"


def test_a_delivery_without_a_record_excludes_nothing(custody: FileCustody) -> None:
    custody.open(DELIVERY)
    (custody.root / "deliveries" / DELIVERY / "exclude.json").unlink()
    fresh = FileCustody(custody.root)
    assert fresh.excluded(DELIVERY) == ()
    workspace = Path(fresh.workspace(DELIVERY))
    (workspace / ".git").mkdir()
    (workspace / ".git" / "HEAD").write_text("ref\n")
    assert [e.path for e in fresh.manifest(DELIVERY, fresh.snapshot(DELIVERY).savepoint)] == [
        ".git/HEAD"
    ]


@pytest.mark.parametrize("name", ["a/b", "", ".", ".."])
def test_an_excluded_name_must_be_one_folder_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="one folder name"):
        FileCustody(tmp_path / "custody", exclude=frozenset({name}))


def test_the_exclusion_record_is_canonical_json(custody: FileCustody) -> None:
    custody.open(DELIVERY)
    data = (custody.root / "deliveries" / DELIVERY / "exclude.json").read_bytes()
    names = ",".join(f'"{name}"' for name in sorted(DEFAULT_EXCLUDED))
    assert data == (
        b'{"format":"execution-system/custody-exclude/v1","names":[' + names.encode() + b"]}"
    )
    assert os.stat(custody.root / "deliveries" / DELIVERY / "exclude.json").st_size == len(data)


def test_a_delivery_set_to_leave_out_more_is_opened_without_it(
    custody: FileCustody, project: Path
) -> None:
    (project / "datasets").mkdir()
    (project / "datasets" / "rows.csv").write_text("a,b\n")
    with pytest.raises(ValueError, match="one folder name"):
        custody.set_exclusions(DELIVERY, frozenset({"data/raw"}))
    chosen = DEFAULT_EXCLUDED | {"datasets"}
    custody.set_exclusions(DELIVERY, chosen)
    custody.set_exclusions(DELIVERY, chosen)  # the same set again: nothing to do
    custody.open(DELIVERY, seed=str(project))
    assert _paths(custody) == ["pyproject.toml", "src/pkg/__init__.py"]
    assert custody.excluded(DELIVERY) == tuple(sorted(chosen))
    with pytest.raises(ExecsysError) as refused:
        custody.set_exclusions(DELIVERY, DEFAULT_EXCLUDED)
    assert refused.value.code is ErrorCode.CUSTODY_REJECTED
    other = FileCustody(custody.root)  # another process, configured with the defaults only
    assert other.excluded(DELIVERY) == tuple(sorted(chosen))
