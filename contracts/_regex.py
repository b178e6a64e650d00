"""Regular expressions of port schemas, matched in linear time with RE2.

A JSON Schema ``pattern`` is code the spec's author runs on data an executor
or a user supplies. Python's backtracking ``re`` takes exponential time on
patterns such as ``^(a+)+$``, so one schema could stall a runner forever.
Every keyword that matches a regular expression (``pattern``,
``patternProperties``, and the two that consult ``patternProperties``:
``additionalProperties`` and ``unevaluatedProperties``) is replaced here by an
RE2 implementation, and a pattern RE2 cannot compile (look-around,
back-references, huge repetitions) is refused at admission.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import re2

#: Memory RE2 may use for one compiled pattern; larger ones are refused.
MAX_PATTERN_MEMORY = 8 << 20


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would otherwise log to stderr itself
    options.max_mem = MAX_PATTERN_MEMORY
    return options


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> Any:
    return re2.compile(pattern, _options())


def pattern_problem(pattern: Any) -> str | None:
    """Why RE2 cannot compile ``pattern``, or ``None`` if it can."""
    if not isinstance(pattern, str):
        return None  # the metaschema check reports a non-string pattern
    try:
        _compiled(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "invalid pattern"
        return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    except (TypeError, ValueError) as exc:  # e.g. a lone surrogate cannot be encoded
        return str(exc)
    return None


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (ECMA-262 ``test`` semantics)."""
    try:
        return _compiled(pattern).search(text) is not None
    except UnicodeEncodeError:
        return False  # a lone surrogate is not text RE2 can read; it matches nothing


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> Iterator[str]:
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    for name in instance:
        if name in properties or any(search(p, name) for p in patterns):
            continue
        yield name


def _is_valid(errors: Iterator[Any]) -> bool:
    return next(errors, None) is None


def _evaluated_keys(validator: Any, instance: Mapping[str, Any], schema: Any) -> set[str]:
    """Keys of ``instance`` that ``schema`` (and the subschemas applied in place) evaluates.

    The shape follows jsonschema's own helper; only local ``$ref`` exists here
    (``contracts._schema`` refuses the rest).
    """
    if not isinstance(schema, Mapping):
        return set(instance) if schema is True else set()
    found: set[str] = set()
    ref = schema.get("$ref")
    if isinstance(ref, str):
        resolved = validator._resolver.lookup(ref)
        found |= _evaluated_keys(
            validator.evolve(schema=resolved.contents, _resolver=resolved.resolver),
            instance,
            resolved.contents,
        )
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        found |= properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if (sub := schema.get(keyword)) is not None:
            found |= {k for k, v in instance.items() if _is_valid(validator.descend(v, sub))}
    for pattern in schema.get("patternProperties", {}):
        found |= {k for k in instance if search(pattern, k)}
    for name, sub in schema.get("dependentSchemas", {}).items():
        if name in instance:
            found |= _evaluated_keys(validator, instance, sub)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for sub in schema.get(keyword, []):
            if _is_valid(validator.descend(instance, sub)):
                found |= _evaluated_keys(validator, instance, sub)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            found |= _evaluated_keys(validator, instance, schema["if"])
            if "then" in schema:
                found |= _evaluated_keys(validator, instance, schema["then"])
        elif "else" in schema:
            found |= _evaluated_keys(validator, instance, schema["else"])
    return found


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not search(pattern, instance):
        shown = repr(instance) if len(instance) <= 60 else repr(instance[:57]) + "..."
        yield ValidationError(f"{shown} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, sub in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, sub, path=key, schema_path=pattern)


def _additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    extras = sorted(_additional(instance, schema))
    if validator.is_type(extra, "object"):
        for name in extras:
            yield from validator.descend(instance[name], extra, path=name)
    elif not extra and extras:
        joined = ", ".join(repr(name) for name in extras)
        yield ValidationError(f"additional properties are not allowed ({joined})")


def _unevaluated_properties(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    bad = sorted(
        name
        for name in instance
        if name not in evaluated
        and not _is_valid(validator.descend(instance[name], unevaluated, path=name))
    )
    if bad:
        joined = ", ".join(repr(name) for name in bad)
        yield ValidationError(f"unevaluated properties are not allowed ({joined})")


#: The keyword implementations that replace jsonschema's ``re``-based ones.
KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "unevaluatedProperties": _unevaluated_properties,
}
