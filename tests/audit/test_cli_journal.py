"""``execsys journal`` and ``execsys keys`` through the real CLI, as separate processes."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest

from tests.audit.cli import EXAMPLE, execsys, triage_delivery


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


# --- bundles, audits and keys ------------------------------------------------------------

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "audit"


def _one_error_line(done: subprocess.CompletedProcess[str], code: str) -> str:
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"execsys: {code} at "), lines[0]
    return lines[0]


def test_export_a_bundle_and_audit_it_offline(delivery: tuple[Path, str]) -> None:
    tmp, did = delivery
    bundle = tmp / "triage.bundle"
    assert (
        execsys(tmp, "journal", "export", did, "--bundle", "--output", str(bundle)).returncode == 0
    )
    done = execsys(tmp, "journal", "audit", "--file", str(bundle))
    assert done.returncode == 0, done.stderr
    assert "audit: clean; records included; unsigned" in done.stdout
    assert "wait signoff#1: resolved by alice as maintainer" in done.stdout
    report = json.loads(execsys(tmp, "journal", "audit", "--file", str(bundle), "--json").stdout)
    assert report["ok"] is True and report["delivery"] == did
    assert report["code"] is None and report["violations"] == []
    assert report["path"][-1] == "done#1"
    assert report["waits"] == [
        {
            "node": "signoff",
            "activation": 1,
            "ordinal": report["waits"][0]["ordinal"],
            "approvals": [{"actor": "alice", "role": "maintainer"}],
        }
    ]


def test_audit_straight_from_the_store(delivery: tuple[Path, str]) -> None:
    tmp, did = delivery
    done = execsys(tmp, "journal", "audit", did, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["records"] == "included"


def test_a_digests_only_bundle_audits_without_records(delivery: tuple[Path, str]) -> None:
    tmp, did = delivery
    bundle = tmp / "digests.bundle"
    args = ("journal", "export", did, "--bundle", "--no-records", "--output", str(bundle))
    assert execsys(tmp, *args).returncode == 0
    report = json.loads(execsys(tmp, "journal", "audit", "--file", str(bundle), "--json").stdout)
    assert (report["ok"], report["records"]) == (True, "digests")


def test_keys_sign_and_check(delivery: tuple[Path, str]) -> None:
    tmp, did = delivery
    assert execsys(tmp, "keys", "generate", "--output", str(tmp / "audit")).returncode == 0
    assert stat.S_IMODE((tmp / "audit").stat().st_mode) == 0o600
    assert b"PUBLIC KEY" in (tmp / "audit.pub").read_bytes()
    again = execsys(tmp, "keys", "generate", "--output", str(tmp / "audit"))
    assert again.returncode == 2
    _one_error_line(again, "FILE_NOT_WRITABLE")
    assert execsys(tmp, "keys", "generate", "--output", str(tmp / "other")).returncode == 0
    bundle = tmp / "signed.bundle"
    signed = ("journal", "export", did, "--bundle", "--sign", str(tmp / "audit"))
    assert execsys(tmp, *signed, "--output", str(bundle)).returncode == 0
    ok = execsys(tmp, "journal", "audit", "--file", str(bundle), "--key", str(tmp / "audit.pub"))
    assert ok.returncode == 0, ok.stderr
    assert "(trusted key)" in ok.stdout
    wrong = execsys(tmp, "journal", "audit", "--file", str(bundle), "--key", str(tmp / "other.pub"))
    assert wrong.returncode == 1
    _one_error_line(wrong, "BUNDLE_SIGNATURE_INVALID")
    bad_key = execsys(tmp, "journal", "audit", "--file", str(bundle), "--key", str(bundle))
    assert bad_key.returncode == 2
    _one_error_line(bad_key, "KEY_INVALID")


def test_a_forged_bundle_is_refused_with_its_code_and_ordinal(tmp_path: Path) -> None:
    forged = FIXTURES / "forged-route.bundle"
    done = execsys(tmp_path, "journal", "audit", "--file", str(forged))
    assert done.returncode == 1
    line = _one_error_line(done, "AUDIT_ROUTE_MISMATCH")
    assert line.startswith(f"execsys: AUDIT_ROUTE_MISMATCH at {forged}: ordinal 6: ")
    report = json.loads(
        execsys(tmp_path, "journal", "audit", "--file", str(forged), "--all", "--json").stdout
    )
    assert (report["ok"], report["code"], report["ordinal"]) == (False, "AUDIT_ROUTE_MISMATCH", 6)


def test_a_plain_export_against_its_spec(delivery: tuple[Path, str]) -> None:
    tmp, did = delivery
    journal = tmp / "plain.jsonl"
    assert execsys(tmp, "journal", "export", did, "--output", str(journal)).returncode == 0
    spec = ("--spec", str(EXAMPLE / "spec.yaml"), "--input", str(EXAMPLE / "input.yaml"))
    policy = ("--authority", str(EXAMPLE / "authority.yaml"))
    done = execsys(tmp, "journal", "audit", "--file", str(journal), *spec, *policy)
    assert done.returncode == 0, done.stderr
    assert "records none" in done.stdout
    (tmp / "other-policy.yaml").write_text("actors: {mallory: [maintainer]}\napprover: mallory\n")
    other = ("--authority", str(tmp / "other-policy.yaml"))
    refused = execsys(tmp, "journal", "audit", "--file", str(journal), *spec, *other)
    assert refused.returncode == 1
    _one_error_line(refused, "AUDIT_HEADER_MISMATCH")


@pytest.mark.parametrize(
    "args",
    [
        ("journal", "export", "d-x", "--no-records"),
        ("journal", "audit"),
        ("journal", "audit", "d-x", "--file", "f"),
        ("journal", "audit", "--file", "f", "--input", "i.yaml"),
        ("journal", "audit", "d-x", "--spec", "s.yaml"),
    ],
)
def test_audit_usage_errors_are_one_line(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = execsys(tmp_path, *args)
    assert done.returncode == 2
    _one_error_line(done, "USAGE")
