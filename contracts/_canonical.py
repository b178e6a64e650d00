"""Canonical JSON (RFC 8785) and the SHA-256 digests built on it."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

from contracts._ids import Digest

DIGEST_PREFIX = "sha256:"


def canonical_bytes(value: Any) -> bytes:
    """Return the RFC 8785 canonical JSON encoding of ``value``.

    ``value`` must be JSON-native (dict with str keys, list, str, int, float,
    bool, None). Floats that are not finite are refused by the encoder.
    """
    return bytes(rfc8785.dumps(value))


def digest_bytes(data: bytes) -> Digest:
    """Return the ``sha256:<hex>`` digest of raw bytes."""
    return Digest(DIGEST_PREFIX + hashlib.sha256(data).hexdigest())


def digest_of(value: Any) -> Digest:
    """Return the digest of the canonical JSON encoding of ``value``."""
    return digest_bytes(canonical_bytes(value))
