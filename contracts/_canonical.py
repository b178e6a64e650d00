"""Canonical JSON (RFC 8785) and the SHA-256 digests built on it.

RFC 8785 fixes key order (UTF-16 code units), number formatting and string
escapes. For values whose member names are ASCII, whose integers fit an IEEE
double exactly and whose floats are non-integral with a magnitude in
[1e-4, 1e16), orjson's compact key-sorted output is byte-identical to it
(``tests/test_canonical.py`` checks this property), and about twenty times
faster than the reference encoder; everything else goes through the
reference ``rfc8785`` encoder. In that float range both print the shortest
round-trip digits without an exponent; an integral float prints differently
(``5.0`` against ``5``). The range is narrower than where the two were seen to
agree, so that no exponent form is involved. A timestamp such as a
capability's expiry is such a float. An integral float below 2^53 in
magnitude (a ``timeout_s`` of ``60.0``) is what RFC 8785 prints as the integer
of the same value, so such floats are encoded as those integers on the fast
path instead of sending the whole value to the reference encoder.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import orjson
import rfc8785

from contracts._ids import Digest

DIGEST_PREFIX = "sha256:"
_MAX_EXACT = 2**53 - 1
MAX_EXACT_INTEGER = _MAX_EXACT
"""Largest integer magnitude RFC 8785 (IEEE doubles) represents exactly."""
_SORTED = orjson.OPT_SORT_KEYS
_FLOAT_LOW, _FLOAT_HIGH = 1e-4, 1e16
"""Magnitudes whose non-integral floats print alike in orjson and RFC 8785."""


_NO, _YES, _AS_INTS = 0, 1, 2
"""What :func:`_fast_path` found: the reference encoder, orjson, orjson once integral
floats are integers."""


def _fast_path(value: Any) -> int:
    found = _YES
    stack = [value]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is str or kind is bool or current is None:
            continue
        if kind is int:
            if -_MAX_EXACT <= current <= _MAX_EXACT:
                continue
            return _NO
        if kind is dict:
            for key, item in current.items():
                if type(key) is not str or not key.isascii():
                    return _NO
                stack.append(item)
            continue
        if kind is list or kind is tuple:
            stack.extend(current)
            continue
        if kind is float:
            if current.is_integer():
                if abs(current) <= _MAX_EXACT:
                    found = _AS_INTS  # exactly the integer RFC 8785 prints for it
                    continue
                return _NO
            if _FLOAT_LOW <= abs(current) < _FLOAT_HIGH:
                continue
        return _NO  # other floats and anything else: the reference encoder decides
    return found


def _integral_floats_as_ints(value: Any) -> Any:
    """A copy of ``value`` whose integral floats are ints (containers copied, scalars shared)."""
    root = [value]
    stack: list[Any] = [root]
    while stack:
        container = stack.pop()
        pairs = container.items() if type(container) is dict else enumerate(container)
        for key, item in pairs:
            kind = type(item)
            if kind is float:
                if item.is_integer():
                    container[key] = int(item)  # a value replaced, never a key added
            elif kind is dict:
                container[key] = mapping = dict(item)
                stack.append(mapping)
            elif kind is list or kind is tuple:
                container[key] = items = list(item)
                stack.append(items)
    return root[0]


def number_problem(value: float) -> str | None:
    """Why a number cannot be canonical JSON (huge integer, infinity, NaN), or ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if -_MAX_EXACT <= value <= _MAX_EXACT:
            return None
        shown = (
            str(value) if value.bit_length() < 200 else f"an integer of {len(str(value))} digits"
        )
        return f"{shown} is outside the exact integer range of JSON numbers (2^53 - 1)"
    if math.isfinite(value):
        return None
    return f"{value} is not a finite number"


def domain_problem(value: Any, max_depth: int | None = None) -> str | None:
    """Why ``value`` is outside canonical JSON (RFC 8785), or ``None`` if it is inside.

    Checked iteratively, so nesting depth alone never raises; ``max_depth``
    bounds how deeply objects and arrays may nest.
    """
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        current, where, depth = stack.pop()
        at = f" at {where}" if where else ""
        if current is None or isinstance(current, str | bool):
            continue
        if isinstance(current, int | float):
            problem = number_problem(current)
            if problem is not None:
                return problem + at
            continue
        if max_depth is not None and depth >= max_depth:
            return f"values nest deeper than {max_depth} levels{at[:120]}"
        if isinstance(current, dict):
            for key, item in current.items():
                if not isinstance(key, str):
                    return f"key {key!r} is not a string{at}"
                stack.append((item, f"{where}.{key}" if where else key, depth + 1))
        elif isinstance(current, list | tuple):
            stack.extend(
                (item, f"{where}.{i}" if where else str(i), depth + 1)
                for i, item in enumerate(current)
            )
        else:
            return f"a {type(current).__name__} is not a JSON value{at}"
    return None


def canonical_bytes(value: Any) -> bytes:
    """Return the RFC 8785 canonical JSON encoding of ``value``.

    ``value`` must be JSON-native (dict with str keys, list, str, int, float,
    bool, None). Floats that are not finite are refused by the encoder.
    """
    path = _fast_path(value)
    if path == _YES:
        return orjson.dumps(value, option=_SORTED)
    if path == _AS_INTS:
        return orjson.dumps(_integral_floats_as_ints(value), option=_SORTED)
    return bytes(rfc8785.dumps(value))


def digest_bytes(data: bytes) -> Digest:
    """Return the ``sha256:<hex>`` digest of raw bytes."""
    return Digest(DIGEST_PREFIX + hashlib.sha256(data).hexdigest())


def digest_of(value: Any) -> Digest:
    """Return the digest of the canonical JSON encoding of ``value``."""
    return digest_bytes(canonical_bytes(value))
