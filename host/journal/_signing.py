"""Ed25519 keys and signatures over a bundle's digest (the ``cryptography`` package).

A signature signs the ASCII bytes of the bundle digest (``sha256:<hex>``); the
bundle carries the signer's raw public key beside it, so an auditor can tell
*which* key signed, and ``--key`` says which key they trust.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from contracts._errors import ErrorCode, error

ALGORITHM = "ed25519"
"""The one signature algorithm a bundle may name."""


def generate_key_pair() -> tuple[bytes, bytes]:
    """A new key pair as ``(private PEM, public PEM)``: PKCS#8 and SubjectPublicKeyInfo."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public


def load_private_key(data: bytes, where: str) -> Ed25519PrivateKey:
    """Read an unencrypted PEM Ed25519 private key; KEY_INVALID otherwise."""
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise error(
            ErrorCode.KEY_INVALID,
            f"not a readable private key: {exc}".splitlines()[0][:200],
            path=where,
            expected="an unencrypted PEM Ed25519 private key (execsys keys generate)",
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise error(
            ErrorCode.KEY_INVALID, "not an Ed25519 key", path=where, expected="an Ed25519 key"
        )
    return key


def load_public_key(data: bytes, where: str) -> Ed25519PublicKey:
    """Read a PEM Ed25519 public key; KEY_INVALID otherwise."""
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise error(
            ErrorCode.KEY_INVALID,
            f"not a readable public key: {exc}".splitlines()[0][:200],
            path=where,
            expected="a PEM Ed25519 public key (the .pub of execsys keys generate)",
        ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise error(
            ErrorCode.KEY_INVALID, "not an Ed25519 key", path=where, expected="an Ed25519 key"
        )
    return key


def _raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(key: Ed25519PublicKey) -> str:
    """A short stable name of a public key: ``ed25519:`` and 16 hex digits of its SHA-256."""
    return "ed25519:" + hashlib.sha256(_raw(key)).hexdigest()[:16]


def sign_digest(key: Ed25519PrivateKey, digest: str) -> dict[str, str]:
    """The ``signature`` member of a bundle trailer for ``digest``."""
    return {
        "algorithm": ALGORITHM,
        "key": base64.b64encode(_raw(key.public_key())).decode(),
        "value": base64.b64encode(key.sign(digest.encode())).decode(),
    }


def check_signature(
    signature: Any, digest: str, trusted: Ed25519PublicKey | None
) -> Ed25519PublicKey | None:
    """Check a trailer's ``signature`` over ``digest``; return the signing key (None if unsigned).

    With ``trusted``, the bundle must be signed by exactly that key
    (BUNDLE_UNSIGNED, BUNDLE_SIGNATURE_INVALID); without it, a signature present
    must still verify under the key it names.
    """
    if signature is None:
        if trusted is not None:
            raise error(
                ErrorCode.BUNDLE_UNSIGNED,
                "the bundle carries no signature",
                path="trailer",
                expected=f"a signature by {fingerprint(trusted)}",
            )
        return None
    if (
        not isinstance(signature, dict)
        or set(signature) != {"algorithm", "key", "value"}
        or signature["algorithm"] != ALGORITHM
        or not all(isinstance(signature[k], str) for k in ("key", "value"))
    ):
        raise error(
            ErrorCode.BUNDLE_SIGNATURE_INVALID,
            "the signature member is malformed",
            path="trailer",
            expected='{"algorithm": "ed25519", "key": ..., "value": ...}',
        )
    try:
        raw = base64.b64decode(signature["key"], validate=True)
        value = base64.b64decode(signature["value"], validate=True)
        signer = Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        raise error(
            ErrorCode.BUNDLE_SIGNATURE_INVALID,
            "the signature's key or value is not valid base64 Ed25519 data",
            path="trailer",
        ) from None
    if trusted is not None and _raw(trusted) != raw:
        raise error(
            ErrorCode.BUNDLE_SIGNATURE_INVALID,
            f"signed by {fingerprint(signer)}, not by the trusted key",
            path="trailer",
            expected=fingerprint(trusted),
        )
    try:
        signer.verify(value, digest.encode())
    except InvalidSignature:
        raise error(
            ErrorCode.BUNDLE_SIGNATURE_INVALID,
            "the signature does not verify over the bundle digest",
            path="trailer",
        ) from None
    return signer
