"""The audit fixture pack: real deliveries audit clean; each forgery fails with its code."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import ErrorCode, ExecsysError
from contracts._canonical import canonical_bytes
from host.journal import (
    audit_bundle,
    encode_bundle,
    generate_key_pair,
    load_private_key,
    load_public_key,
    parse_bundle,
    verify_lines,
)
from tests.audit.make_fixtures import EXPECTED, FIXTURES, build_all
from tests.journal.strategies import single_byte_changes


def _outcome(data: bytes) -> str:
    report = audit_bundle(data)
    if report.ok:
        return "ok"
    first = report.violations[0]
    return f"{first.code.value}@{first.ordinal}"


def test_the_pack_is_complete() -> None:
    assert sorted(p.name for p in FIXTURES.glob("*.bundle")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_bundle_audits_as_expected(name: str) -> None:
    assert _outcome((FIXTURES / name).read_bytes()) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if n.startswith("forged-")))
def test_each_forgery_keeps_a_valid_chain_and_digest(name: str) -> None:
    # Only the audit's rules can refuse these: the bundle digest and the chain hold.
    bundle = parse_bundle((FIXTURES / name).read_bytes())
    assert verify_lines(bundle.journal).ok


def test_every_audit_rule_family_has_a_forgery() -> None:
    codes = {outcome.split("@")[0] for outcome in EXPECTED.values() if outcome != "ok"}
    audit_codes = {code.value for code in ErrorCode if code.value.startswith("AUDIT_")}
    assert audit_codes - {"AUDIT_DELIVERY_INVALID"} <= codes


def test_regenerated_pack_has_the_same_outcomes(tmp_path: Path) -> None:
    files = build_all(tmp_path)
    assert {name: _outcome(data) for name, data in files.items()} == EXPECTED


CLEAN = (FIXTURES / "fanout-approval.bundle").read_bytes()


def _signed(data: bytes, private: bytes) -> bytes:
    bundle = parse_bundle(data)
    records = bundle.records or {}
    return encode_bundle(
        bundle.delivery,
        bundle.journal,
        lambda digest: json.loads(records[digest]),
        retirement=bundle.retirement,
        key=load_private_key(private, "key"),
    )


def test_a_signed_bundle_audits_under_its_key_only() -> None:
    private, public = generate_key_pair()
    other = generate_key_pair()[1]
    signed = _signed(CLEAN, private)
    report = audit_bundle(signed, key=load_public_key(public, "key.pub"))
    assert report.ok and report.trusted and report.signer is not None
    wrong = audit_bundle(signed, key=load_public_key(other, "other.pub"))
    assert wrong.violations[0].code is ErrorCode.BUNDLE_SIGNATURE_INVALID
    unsigned = audit_bundle(CLEAN, key=load_public_key(public, "key.pub"))
    assert unsigned.violations[0].code is ErrorCode.BUNDLE_UNSIGNED
    untrusted = audit_bundle(signed)
    assert untrusted.ok and not untrusted.trusted


def test_a_re_digested_signed_bundle_fails_its_signature() -> None:
    private, public = generate_key_pair()
    signed = _signed(CLEAN, private)
    # A forger edits the body and recomputes the digest, keeping the old signature.
    body_end = signed.rindex(b"\n", 0, len(signed) - 1) + 1
    body = signed[:body_end].replace(b'"v":1', b'"v":2', 1)
    assert body != signed[:body_end]
    signature = json.loads(signed[body_end:])["signature"]
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    forged = body + canonical_bytes({"digest": digest, "signature": signature}) + b"\n"
    for key in (load_public_key(public, "key.pub"), None):
        report = audit_bundle(forged, key=key)
        assert report.violations[0].code is ErrorCode.BUNDLE_SIGNATURE_INVALID


SIGNED = _signed(CLEAN, generate_key_pair()[0])


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_any_single_byte_change_fails_the_audit(data: st.DataObject) -> None:
    tampered = data.draw(single_byte_changes(SIGNED))
    report = audit_bundle(tampered)
    assert not report.ok
    assert report.violations[0].code.value.startswith(("BUNDLE_", "JOURNAL_", "AUDIT_"))


def test_bad_key_files_are_coded() -> None:
    with pytest.raises(ExecsysError) as bad:
        load_public_key(b"not a key", "k.pub")
    assert bad.value.code is ErrorCode.KEY_INVALID
    with pytest.raises(ExecsysError) as wrong_kind:
        load_private_key(generate_key_pair()[1], "k")
    assert wrong_kind.value.code is ErrorCode.KEY_INVALID


def test_truncated_and_empty_bundles_are_malformed() -> None:
    for data in (b"", b"\n", CLEAN[:-1], CLEAN[: len(CLEAN) // 2]):
        report = audit_bundle(data)
        assert report.violations[0].code in {
            ErrorCode.BUNDLE_MALFORMED,
            ErrorCode.BUNDLE_NONCANONICAL,
            ErrorCode.BUNDLE_DIGEST_MISMATCH,
        }, data[:40]


def _rewritten(data: bytes, edit: Any) -> bytes:
    """``data`` with its body lines passed through ``edit`` and the bundle digest re-taken."""
    lines = data[:-1].split(b"\n")[:-1]
    body = b"".join(line + b"\n" for line in edit(lines))
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    return body + canonical_bytes({"digest": digest, "signature": None}) + b"\n"


def test_the_record_listing_is_judged_before_any_event() -> None:
    # A listing that drops a record, and a journal whose last event is broken:
    # the listing is the one violation, as if checked before the first event,
    # though the audit reads the references from its pass over the events.
    def edit(lines: list[bytes]) -> list[bytes]:
        meta = json.loads(lines[0])
        count = meta["journal"]
        journal, listed = lines[1 : 1 + count], lines[1 + count :]
        meta["count"] -= 1
        return [canonical_bytes(meta), *journal[:-1], b"{}", *listed[1:]]

    data = _rewritten((FIXTURES / "loop.bundle").read_bytes(), edit)
    report = audit_bundle(data)
    assert [(v.code, v.ordinal) for v in report.violations] == [
        (ErrorCode.AUDIT_RECORD_MISSING, None)
    ]
    assert (report.events, report.head, report.path) == (0, None, [])
    # With the listing intact, the broken event is what the audit reports.
    intact = _rewritten(
        (FIXTURES / "loop.bundle").read_bytes(),
        lambda lines: [
            *lines[: json.loads(lines[0])["journal"]],
            b"{}",
            *lines[1 + json.loads(lines[0])["journal"] :],
        ],
    )
    assert [v.code for v in audit_bundle(intact).violations] == [ErrorCode.JOURNAL_MALFORMED_RECORD]


@pytest.mark.parametrize(
    "line",
    [b"garbage", b"[1]", b'{"record":"event"}', b'{"record":"event","refs":[1]}'],
    ids=["not JSON", "not an object", "no members", "a ref that is not an object"],
)
def test_a_malformed_journal_line_is_a_violation_not_a_crash(line: bytes) -> None:
    # The bundle's digest holds, so only the audit can refuse the line; listing
    # the records it references must not trip over it first.
    def edit(lines: list[bytes]) -> list[bytes]:
        count = json.loads(lines[0])["journal"]
        return [*lines[:count], line, *lines[1 + count :]]

    report = audit_bundle(_rewritten((FIXTURES / "retry.bundle").read_bytes(), edit))
    assert not report.ok
    assert report.violations[0].code in {
        ErrorCode.JOURNAL_MALFORMED_RECORD,
        ErrorCode.AUDIT_RECORD_MISSING,
    }
