"""The tokens file: hashes of bearer tokens, each with a role, an actor and a scope.

A token is shown once, when it is created; the file keeps only its SHA-256.
Tokens are 256 random bits, so a fast hash is enough: there is nothing to
guess from it (see docs/decisions/0060-web-tokens-and-roles.md).
"""

from __future__ import annotations

import hashlib
import os
import secrets
from dataclasses import dataclass
from enum import StrEnum, unique
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contracts import ErrorCode, error, validation_message
from execution_system._loading import load_document

TOKEN_PREFIX = "est_"
"""Every token starts with this, so a leaked one is easy to recognise and scan for."""


@unique
class Role(StrEnum):
    """The closed set of roles a token can hold."""

    VIEWER = "viewer"
    OPERATOR = "operator"
    APPROVER = "approver"
    AGENT = "agent"


class TokenEntry(BaseModel):
    """One line of the tokens file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """Hex SHA-256 of the token."""
    role: Role
    """What the token may do."""
    actor: str = Field(min_length=1, max_length=128)
    """Who acts with it (journaled on every mutating call)."""
    deliveries: tuple[str, ...] = ()
    """For an agent: the deliveries it may read and answer."""


class _TokensFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tokens: tuple[TokenEntry, ...] = ()


@dataclass(frozen=True)
class Tokens:
    """The loaded tokens file, looked up by hash."""

    entries: dict[str, TokenEntry]

    def lookup(self, token: str) -> TokenEntry | None:
        """The entry of ``token``, or None if the file does not hold its hash."""
        return self.entries.get(hash_token(token))


def hash_token(token: str) -> str:
    """The hex SHA-256 the tokens file keeps for ``token``."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def load_tokens(path: Path) -> Tokens:
    """Read and check a tokens file."""
    document: Any = load_document(path)
    try:
        parsed = _TokensFile.model_validate(document)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise error(
            ErrorCode.TOKENS_INVALID,
            validation_message(first["msg"]),
            path=f"{path}:{where}",
            expected="tokens: [{sha256: HEX, role: viewer|operator|approver|agent, actor: NAME}]",
        ) from None
    for entry in parsed.tokens:
        if entry.role is Role.AGENT and not entry.deliveries:
            raise error(
                ErrorCode.TOKENS_INVALID,
                f"agent token of {entry.actor!r} is scoped to no delivery",
                path=str(path),
                expected="deliveries: [DELIVERY, ...] on every agent token",
            )
    return Tokens({entry.sha256: entry for entry in parsed.tokens})


def add_token(path: Path, role: str, actor: str, deliveries: tuple[str, ...] = ()) -> str:
    """Create a token, append its hash to ``path`` (created 0600 if absent); return the token."""
    try:
        chosen = Role(role)
    except ValueError:
        raise error(
            ErrorCode.TOKENS_INVALID,
            f"unknown role {role!r}",
            path="--role",
            expected="viewer | operator | approver | agent",
        ) from None
    if chosen is Role.AGENT and not deliveries:
        raise error(
            ErrorCode.TOKENS_INVALID,
            "an agent token needs the deliveries it may answer",
            path="--delivery",
            expected="--delivery DELIVERY (repeatable)",
        )
    if chosen is not Role.AGENT and deliveries:
        raise error(
            ErrorCode.TOKENS_INVALID,
            f"a {chosen.value} token is not scoped to deliveries",
            path="--delivery",
            expected="--delivery only with --role agent",
        )
    existing = load_tokens(path).entries if path.exists() else {}
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    try:
        entry = TokenEntry(
            sha256=hash_token(token), role=chosen, actor=actor, deliveries=deliveries
        )
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise error(
            ErrorCode.TOKENS_INVALID,
            validation_message(first["msg"]),
            path="--actor",
            expected="1 to 128 characters",
        ) from None
    rows = [e.model_dump(mode="json", exclude_defaults=True) for e in existing.values()]
    rows.append(entry.model_dump(mode="json", exclude_defaults=True))
    text = yaml.safe_dump({"tokens": rows}, sort_keys=False, allow_unicode=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("# execsys web tokens: only SHA-256 hashes are kept here.\n")
        handle.write(text)
    os.replace(tmp, path)
    return token
