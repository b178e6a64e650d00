"""``execsys journal`` through the real CLI: coded refusals for paths that are not files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.audit.cli import execsys, triage_delivery


@pytest.fixture(scope="module")
def delivery(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("journal-cli")
    return tmp, triage_delivery(tmp)


def test_export_to_a_directory_is_one_coded_line(delivery: tuple[Path, str]) -> None:
    tmp, did = delivery
    (tmp / "out").mkdir()
    done = execsys(tmp, "journal", "export", did, "--output", str(tmp / "out"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"execsys: FILE_NOT_WRITABLE at {tmp / 'out'}: is a directory "
        "(expected a file path to write)"
    ]


def test_export_into_a_missing_folder_is_coded(delivery: tuple[Path, str]) -> None:
    tmp, did = delivery
    done = execsys(tmp, "journal", "export", did, "--output", str(tmp / "nowhere" / "j.jsonl"))
    assert done.returncode == 2
    assert done.stderr.startswith("execsys: FILE_NOT_WRITABLE at ")
    assert len(done.stderr.splitlines()) == 1


def test_verify_a_directory_says_it_is_one(delivery: tuple[Path, str]) -> None:
    tmp, _ = delivery
    done = execsys(tmp, "journal", "verify", "--file", ".")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "execsys: FILE_NOT_FOUND at .: is a directory (expected a file)"
    ]


def test_export_then_verify_the_file(delivery: tuple[Path, str]) -> None:
    tmp, did = delivery
    out = tmp / "journal.jsonl"
    assert execsys(tmp, "journal", "export", did, "--output", str(out)).returncode == 0
    done = execsys(tmp, "journal", "verify", "--file", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: ")
