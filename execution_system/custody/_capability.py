"""Signed workspace capabilities: the custody key, token encoding and claim checks.

Token format: ``base64url(canonical claims JSON, unpadded) + "." + hex(HMAC-SHA256)``.
The MAC covers a domain tag plus the exact JSON bytes, under a 32-byte key
that only custody holds (``<root>/key``, mode 0600). The key never appears
in a repr, a message or a log line.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import stat
import threading
from pathlib import Path

import pydantic

from contracts import (
    CapabilityClaims,
    ErrorCode,
    ExecutionSite,
    canonical_bytes,
    error,
)
from execution_system.custody._durable import fsync_dir, temp_name, write_all
from execution_system.custody._tree import Refusal, protected_by, within

#: Bytes of HMAC key material.
KEY_BYTES = 32

#: Separates capability MACs from any other use of the key.
_DOMAIN = b"execution-system/capability/v1\n"


class SigningKey:
    """The custody key; deliberately opaque (no repr, str or equality of its bytes)."""

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def __repr__(self) -> str:
        return "SigningKey(<redacted>)"

    __str__ = __repr__

    def sign(self, payload: bytes) -> str:
        """Hex HMAC-SHA256 of ``payload`` under this key."""
        return hmac.new(self._secret, _DOMAIN + payload, hashlib.sha256).hexdigest()


def _check_key_file(path: Path) -> None:
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise error(
            ErrorCode.CUSTODY_KEY_INVALID,
            "the custody key is not a regular file",
            path=os.fspath(path),
            expected="a regular file",
        )
    if st.st_mode & 0o077:
        raise error(
            ErrorCode.CUSTODY_KEY_INVALID,
            f"the custody key is accessible to group or others (mode {st.st_mode & 0o777:o})",
            path=os.fspath(path),
            expected="mode 0600",
        )
    if st.st_uid != os.getuid():
        raise error(
            ErrorCode.CUSTODY_KEY_INVALID,
            "the custody key belongs to another user",
            path=os.fspath(path),
            expected="owned by the custody process's user",
        )
    if st.st_size != KEY_BYTES:
        raise error(
            ErrorCode.CUSTODY_KEY_INVALID,
            f"the custody key has {st.st_size} bytes",
            path=os.fspath(path),
            expected=f"{KEY_BYTES} bytes",
        )


def load_or_create_key(path: Path) -> SigningKey:
    """Load the key at ``path``, creating it (0600, random) if there is none.

    Creation writes a private temporary file (``O_CREAT | O_EXCL``, 0600) and
    publishes it with ``link``, which fails if another process got there first;
    the loser then reads the winner's complete key.
    """
    if not os.path.lexists(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_name(path)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            write_all(fd, secrets.token_bytes(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
        fsync_dir(path.parent)
    _check_key_file(path)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        secret = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(secret) != KEY_BYTES:
        raise error(
            ErrorCode.CUSTODY_KEY_INVALID,
            "the custody key changed size while read",
            path=os.fspath(path),
        )
    return SigningKey(secret)


def encode_token(claims: CapabilityClaims, key: SigningKey) -> str:
    """Serialize and sign ``claims``."""
    payload = canonical_bytes(claims.model_dump(mode="json"))
    text = base64.urlsafe_b64encode(payload).rstrip(b"=").decode("ascii")
    return f"{text}.{key.sign(payload)}"


#: Tokens whose claims one custody instance remembers between issue and validate.
_MINTED_MEMORY = 1024


class MintedTokens:
    """Tokens this custody instance signed, each with the claims it signed.

    A token presented for validation that is found here by exact string is the
    one signed with these claims under this instance's key, which is what
    checking its signature would establish, so its parse is skipped. A token is
    taken once: a second presentation (a replay) is decoded and checked in full.
    """

    def __init__(self) -> None:
        self._claims: dict[str, CapabilityClaims] = {}
        self._lock = threading.Lock()

    def remember(self, token: str, claims: CapabilityClaims) -> None:
        """Note a token just signed (the oldest is forgotten beyond the memory's size)."""
        with self._lock:
            if len(self._claims) >= _MINTED_MEMORY:
                self._claims.pop(next(iter(self._claims)))
            self._claims[token] = claims

    def take(self, token: str) -> CapabilityClaims | None:
        """The claims ``token`` was signed with here, forgetting it; None if unknown."""
        with self._lock:
            return self._claims.pop(token, None)


def _malformed(message: str) -> Refusal:
    return Refusal(ErrorCode.CAPABILITY_MALFORMED, "capability", message)


def decode_token(token: str, key: SigningKey) -> CapabilityClaims:
    """Verify a token's signature and return its claims (``Refusal`` otherwise)."""
    text, dot, signature = token.partition(".")
    if not dot or not text or "." in signature:
        raise _malformed("the token is not '<claims>.<signature>'")
    if len(signature) != 64 or signature.strip("0123456789abcdef"):
        raise _malformed("the signature is not 64 lowercase hex digits")
    try:
        payload = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise _malformed("the claims are not base64url") from None
    if not hmac.compare_digest(key.sign(payload), signature):
        raise Refusal(
            ErrorCode.CAPABILITY_BAD_SIGNATURE,
            "capability",
            "the signature does not match the claims under the custody key",
        )
    try:
        return CapabilityClaims.model_validate(json.loads(payload))
    except (ValueError, pydantic.ValidationError):
        # Only reachable with a key-holder's mistake: custody signs valid claims only.
        raise _malformed("the signed claims are not valid capability claims") from None


def check_site(claims: CapabilityClaims, site: ExecutionSite) -> None:
    """Refuse a capability used at another delivery, site or invocation than it grants."""
    granted = claims.site
    if not hmac.compare_digest(granted.delivery.encode(), site.delivery.encode()):
        raise Refusal(
            ErrorCode.CAPABILITY_WRONG_DELIVERY,
            "capability.site.delivery",
            f"the capability is for delivery {granted.delivery!r}, not {site.delivery!r}",
        )
    for name in ("node", "activation", "attempt"):
        if getattr(granted, name) != getattr(site, name):
            raise Refusal(
                ErrorCode.CAPABILITY_WRONG_SITE,
                f"capability.site.{name}",
                f"the capability is for {name} {getattr(granted, name)!r}, "
                f"not {getattr(site, name)!r}",
            )
    if not hmac.compare_digest(granted.invocation.encode(), site.invocation.encode()):
        raise Refusal(
            ErrorCode.CAPABILITY_WRONG_INVOCATION,
            "capability.site.invocation",
            f"the capability is for invocation {granted.invocation!r}, not {site.invocation!r}",
        )


def check_changes(claims: CapabilityClaims, changed: list[str]) -> None:
    """Refuse ``changed`` paths the capability's mode, protected set or paths do not allow."""
    if not changed:
        return
    if claims.mode == "read":
        raise Refusal(
            ErrorCode.CUSTODY_WRITE_UNDER_READ,
            changed[0],
            f"a read capability allows no change; {len(changed)} path(s) changed",
        )
    guarded = [path for path in changed if protected_by(path, claims.protected)]
    if guarded:
        raise Refusal(
            ErrorCode.CUSTODY_PROTECTED_PATH,
            guarded[0],
            f"{len(guarded)} changed path(s) under protected {list(claims.protected)}",
        )
    outside = [path for path in changed if not within(path, claims.paths)]
    if outside:
        raise Refusal(
            ErrorCode.CUSTODY_WRITE_OUTSIDE_PATHS,
            outside[0],
            f"{len(outside)} changed path(s) outside {list(claims.paths)}",
        )
