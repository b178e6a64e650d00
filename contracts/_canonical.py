"""Canonical JSON (RFC 8785) and the SHA-256 digests built on it.

RFC 8785 fixes key order (UTF-16 code units), number formatting and string
escapes. For values without floats, whose member names are ASCII and whose
integers fit an IEEE double exactly, orjson's compact key-sorted output is
byte-identical to it (``tests/test_canonical.py`` checks this property), and
about twenty times faster than the reference encoder; everything else goes
through the reference ``rfc8785`` encoder.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import rfc8785

from contracts._ids import Digest

DIGEST_PREFIX = "sha256:"
_MAX_EXACT = 2**53 - 1
_SORTED = orjson.OPT_SORT_KEYS


def _fast_path_applies(value: Any) -> bool:
    stack = [value]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is str or kind is bool or current is None:
            continue
        if kind is int:
            if -_MAX_EXACT <= current <= _MAX_EXACT:
                continue
            return False
        if kind is dict:
            for key, item in current.items():
                if type(key) is not str or not key.isascii():
                    return False
                stack.append(item)
            continue
        if kind is list or kind is tuple:
            stack.extend(current)
            continue
        return False  # floats and anything else: the reference encoder decides
    return True


def canonical_bytes(value: Any) -> bytes:
    """Return the RFC 8785 canonical JSON encoding of ``value``.

    ``value`` must be JSON-native (dict with str keys, list, str, int, float,
    bool, None). Floats that are not finite are refused by the encoder.
    """
    if _fast_path_applies(value):
        return orjson.dumps(value, option=_SORTED)
    return bytes(rfc8785.dumps(value))


def digest_bytes(data: bytes) -> Digest:
    """Return the ``sha256:<hex>`` digest of raw bytes."""
    return Digest(DIGEST_PREFIX + hashlib.sha256(data).hexdigest())


def digest_of(value: Any) -> Digest:
    """Return the digest of the canonical JSON encoding of ``value``."""
    return digest_bytes(canonical_bytes(value))
