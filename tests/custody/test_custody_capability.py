"""Capabilities: the key file, signatures, and each claim refusal with its code."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from custody_helpers import DELIVERY, Clock, make_site, preview

from contracts import CapabilityClaims, ErrorCode, ExecsysError, SavepointId, canonical_bytes
from execution_system.custody import FileCustody, _capability
from execution_system.custody._capability import MintedTokens, decode_token, load_or_create_key


def test_key_is_created_0600_with_32_random_bytes(
    custody: FileCustody, opened: Callable[[], Path]
) -> None:
    custody.issue(make_site(), "read")
    key = custody.root / "key"
    st = key.lstat()
    assert stat.S_ISREG(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_size == 32
    other = FileCustody(custody.root.parent / "other")
    other.open(DELIVERY)
    other.issue(make_site(), "read")
    assert (other.root / "key").read_bytes() != key.read_bytes()


def test_key_readable_by_others_is_refused(
    custody: FileCustody, opened: Callable[[], Path]
) -> None:
    key = custody.root / "key"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, os.urandom(32))
    os.close(fd)
    key.chmod(0o644)
    with pytest.raises(ExecsysError) as caught:
        custody.issue(make_site(), "read")
    assert caught.value.code is ErrorCode.CUSTODY_KEY_INVALID
    assert "0600" in caught.value.expected


@pytest.mark.parametrize("size", [0, 16, 31, 33, 64])
def test_key_of_wrong_size_is_refused(
    custody: FileCustody, opened: Callable[[], Path], size: int
) -> None:
    key = custody.root / "key"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"k" * size)
    os.close(fd)
    with pytest.raises(ExecsysError) as caught:
        custody.issue(make_site(), "read")
    assert caught.value.code is ErrorCode.CUSTODY_KEY_INVALID


def test_key_symlink_is_refused(custody: FileCustody, opened: Callable[[], Path]) -> None:
    target = custody.root.parent / "elsewhere"
    target.write_bytes(os.urandom(32))
    target.chmod(0o600)
    (custody.root / "key").symlink_to(target)
    with pytest.raises(ExecsysError) as caught:
        custody.issue(make_site(), "read")
    assert caught.value.code is ErrorCode.CUSTODY_KEY_INVALID


def test_key_never_appears_in_reprs_or_tokens(
    custody: FileCustody, opened: Callable[[], Path]
) -> None:
    cap = custody.issue(make_site(), "write", ("src/",))
    secret = (custody.root / "key").read_bytes()
    texts = [repr(custody), str(custody), repr(cap), cap.token, repr(vars(custody))]
    for text in texts:
        assert secret.hex() not in text
        assert base64.b64encode(secret).decode() not in text


def test_token_shape_and_claims(custody: FileCustody, opened: Callable[[], Path]) -> None:
    cap = custody.issue(make_site(), "write", ("src/", "docs"), ttl_s=60)
    payload, signature = cap.token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["paths"] == ["src", "docs"]
    assert claims["base_savepoint"] == custody.head(DELIVERY)
    assert claims["expires_at"] - claims["issued_at"] == 60
    assert len(signature) == 64
    assert cap.claims.nonce != custody.issue(make_site(), "read").claims.nonce


def _forge(token: str, secret: bytes, **changes: object) -> str:
    payload = token.split(".")[0]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims.update(changes)
    raw = canonical_bytes(claims)
    mac = hmac.new(secret, b"execution-system/capability/v1\n" + raw, hashlib.sha256).hexdigest()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode() + "." + mac


def test_forged_capability_resigned_with_wrong_key_is_refused(
    custody: FileCustody, opened: Callable[[], Path]
) -> None:
    site = make_site()
    cap = custody.issue(site, "read")
    (opened() / "src" / "app.py").write_text("changed\n")
    forged = _forge(cap.token, os.urandom(32), mode="write", paths=[])
    verdict = custody.validate(preview(forged, site))
    assert not verdict.accepted
    assert verdict.code is ErrorCode.CAPABILITY_BAD_SIGNATURE


def test_edited_claims_with_original_signature_are_refused(
    custody: FileCustody, opened: Callable[[], Path]
) -> None:
    site = make_site()
    cap = custody.issue(site, "read")
    signature = cap.token.split(".")[1]
    edited = _forge(cap.token, b"\0" * 32, expires_at=9e12).split(".")[0] + "." + signature
    verdict = custody.validate(preview(edited, site))
    assert verdict.code is ErrorCode.CAPABILITY_BAD_SIGNATURE


@pytest.mark.parametrize(
    "token",
    ["", "no-dot", "a.b.c", "abc.XYZ", "abc." + "0" * 63, "!!!." + "0" * 64, "." + "0" * 64],
)
def test_malformed_tokens_are_refused(
    custody: FileCustody, opened: Callable[[], Path], token: str
) -> None:
    verdict = custody.validate(preview(token, make_site()))
    assert not verdict.accepted
    assert verdict.code is ErrorCode.CAPABILITY_MALFORMED


def test_capability_for_another_delivery_is_refused(
    custody: FileCustody, opened: Callable[[], Path]
) -> None:
    custody.open("d-other")
    cap = custody.issue(make_site("d-other"), "read")
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.code is ErrorCode.CAPABILITY_WRONG_DELIVERY
    assert verdict.path == "capability.site.delivery"


@pytest.mark.parametrize(
    ("field", "value"), [("node", "review"), ("activation", 2), ("attempt", 3)]
)
def test_capability_for_another_site_is_refused(
    custody: FileCustody, opened: Callable[[], Path], field: str, value: object
) -> None:
    cap = custody.issue(make_site(), "read")
    verdict = custody.validate(preview(cap.token, make_site(**{field: value})))
    assert verdict.code is ErrorCode.CAPABILITY_WRONG_SITE
    assert verdict.path == f"capability.site.{field}"


def test_capability_for_another_invocation_is_refused(
    custody: FileCustody, opened: Callable[[], Path]
) -> None:
    cap = custody.issue(make_site(), "read")
    verdict = custody.validate(preview(cap.token, make_site(invocation="inv-2")))
    assert verdict.code is ErrorCode.CAPABILITY_WRONG_INVOCATION


def test_expired_capability_is_refused(
    custody: FileCustody, opened: Callable[[], Path], clock: Clock
) -> None:
    site = make_site()
    cap = custody.issue(site, "read", ttl_s=30)
    clock.now += 29.5
    assert custody.validate(preview(custody.issue(site, "read").token, site)).accepted
    clock.now += 0.5
    verdict = custody.validate(preview(cap.token, site))
    assert verdict.code is ErrorCode.CAPABILITY_EXPIRED


def test_replayed_capability_is_refused(
    custody: FileCustody, opened: Callable[[], Path], clock: Clock
) -> None:
    site = make_site()
    cap = custody.issue(site, "write", ("src",))
    (opened() / "src" / "new.py").write_text("new\n")
    first = custody.validate(preview(cap.token, site))
    assert first.accepted
    assert first.savepoint is not None
    custody.advance(DELIVERY, first.savepoint)
    second = custody.validate(preview(cap.token, site))
    assert not second.accepted
    assert second.code is ErrorCode.CAPABILITY_REPLAYED
    # Used nonces are durable: a new custody instance on the same root refuses too.
    again = FileCustody(custody.root, clock=clock).validate(preview(cap.token, site))
    assert again.code is ErrorCode.CAPABILITY_REPLAYED


def test_refused_commit_does_not_burn_the_nonce(
    custody: FileCustody, opened: Callable[[], Path]
) -> None:
    site = make_site()
    cap = custody.issue(site, "write", ("src",))
    stray = opened() / "docs" / "stray.md"
    stray.write_text("outside\n")
    assert custody.validate(preview(cap.token, site)).code is ErrorCode.CUSTODY_WRITE_OUTSIDE_PATHS
    stray.unlink()
    assert custody.validate(preview(cap.token, site)).accepted


def test_capability_on_stale_base_is_refused(
    custody: FileCustody, opened: Callable[[], Path]
) -> None:
    site = make_site()
    first = custody.issue(site, "write")
    late = custody.issue(make_site(node="other"), "read")
    (opened() / "README.md").write_text("moved on\n")
    verdict = custody.validate(preview(first.token, site))
    assert verdict.savepoint is not None
    custody.advance(DELIVERY, verdict.savepoint)
    stale = custody.validate(preview(late.token, make_site(node="other")))
    assert stale.code is ErrorCode.CAPABILITY_STALE_BASE
    assert stale.path == "capability.base_savepoint"


def test_issue_refuses_unknown_delivery_and_unsafe_prefixes(
    custody: FileCustody, opened: Callable[[], Path]
) -> None:
    with pytest.raises(ExecsysError) as unknown:
        custody.issue(make_site("d-never-opened"), "read")
    assert unknown.value.code is ErrorCode.CUSTODY_WORKSPACE_UNKNOWN
    for prefix in ["../src", "/etc", "src/../..", "a//b", ""]:
        with pytest.raises(ExecsysError) as caught:
            custody.issue(make_site(), "write", (prefix,))
        assert caught.value.code is ErrorCode.CUSTODY_PATH_TRAVERSAL, prefix


def test_a_token_minted_here_is_known_by_its_exact_string_only(
    custody: FileCustody, opened: Callable[[], Path]
) -> None:
    # Validation skips the parse of a token this instance signed (decision 0140); one
    # differing character is an unknown token, checked in full.
    site = make_site()
    cap = custody.issue(site, "write", ("src",))
    key = load_or_create_key(custody.root / "key")
    assert decode_token(cap.token, key) == cap.claims
    payload, signature = cap.token.split(".")
    flipped = f"{payload}.{'1' if signature[0] == '0' else '0'}{signature[1:]}"
    assert custody.validate(preview(flipped, site)).code is ErrorCode.CAPABILITY_BAD_SIGNATURE
    assert custody.validate(preview(cap.token, site)).accepted


def test_minted_tokens_are_taken_once_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_capability, "_MINTED_MEMORY", 2)
    minted = MintedTokens()
    claims = [
        CapabilityClaims(
            site=make_site(),
            mode="read",
            base_savepoint=SavepointId("sha256:" + "0" * 64),
            issued_at=1.5,
            expires_at=2.5,
            nonce=str(i),
        )
        for i in range(3)
    ]
    for i, claim in enumerate(claims):
        minted.remember(f"t{i}", claim)
    assert minted.take("t0") is None  # the oldest, forgotten past the memory's size
    assert minted.take("t1") == claims[1]
    assert minted.take("t1") is None  # taken once: a replay is decoded in full
    assert minted.take("t2") == claims[2]
