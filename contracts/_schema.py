"""Port schemas: JSON Schema Draft 2020-12, a closed subset, checked fail-closed.

A keyword a validator does not know is silently ignored by JSON Schema; for a
spec that governs what may enter durable state that is a hole (a misspelled
``maxLenght`` would accept anything). So every schema in a spec is walked and
each keyword must be one this module knows: an asserting keyword we enforce,
an annotation, or a structural keyword. Known keywords that would not be
enforced (``$dynamicRef``, ``contentSchema``, remote ``$ref``, unknown
``format`` values) are refused as unsupported.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

# jsonschema is imported on first validation: commands that validate nothing
# (status, inspect, journal verify) must start fast.

from contracts._canonical import canonical_bytes
from contracts._errors import ErrorCode, ExecsysError, error
from contracts._regex import KEYWORDS as _RE2_KEYWORDS
from contracts._regex import pattern_problem

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

#: Keywords whose value is one subschema.
_SCHEMA_VALUED = frozenset(
    {
        "not",
        "if",
        "then",
        "else",
        "items",
        "additionalProperties",
        "propertyNames",
        "contains",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
#: Keywords whose value is a list of subschemas.
_SCHEMA_LIST_VALUED = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
#: Keywords whose value maps names to subschemas.
_SCHEMA_MAP_VALUED = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})
#: Keywords whose value is data, not a schema.
_VALUE_KEYWORDS = frozenset(
    {
        "type",
        "enum",
        "const",
        "required",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minContains",
        "maxContains",
        "minProperties",
        "maxProperties",
        "dependentRequired",
        "format",
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$ref",
        "$schema",
    }
)
#: Keywords JSON Schema defines but this product does not enforce.
_UNSUPPORTED = frozenset(
    {
        "$id",
        "$anchor",
        "$dynamicRef",
        "$dynamicAnchor",
        "$recursiveRef",
        "$recursiveAnchor",
        "$vocabulary",
        "definitions",
        "dependencies",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
    }
)
#: ``format`` values enforced without optional third-party checkers.
SUPPORTED_FORMATS = frozenset(
    {"date", "email", "ipv4", "ipv6", "regex", "uuid", "json-pointer", "relative-json-pointer"}
)
_KNOWN = _SCHEMA_VALUED | _SCHEMA_LIST_VALUED | _SCHEMA_MAP_VALUED | _VALUE_KEYWORDS


@lru_cache(maxsize=1)
def _format_checker() -> Any:
    from jsonschema import FormatChecker

    return FormatChecker(sorted(SUPPORTED_FORMATS))


def _walk(schema: Any, path: str, root: Mapping[str, Any]) -> Iterator[ExecsysError]:
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        yield error(
            ErrorCode.SCHEMA_INVALID,
            "a schema must be an object or a boolean",
            path=path,
            expected="a JSON Schema object",
        )
        return
    for key, value in schema.items():
        where = f"{path}.{key}"
        if key in _UNSUPPORTED:
            yield error(
                ErrorCode.SCHEMA_UNSUPPORTED_KEYWORD,
                f"JSON Schema keyword '{key}' is not supported",
                path=where,
                expected="a keyword from the supported Draft 2020-12 subset (docs/spec.md)",
            )
        elif key not in _KNOWN:
            close = difflib.get_close_matches(str(key), sorted(_KNOWN), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            yield error(
                ErrorCode.SCHEMA_UNKNOWN_KEYWORD,
                f"unknown JSON Schema keyword '{key}'{hint}",
                path=where,
                expected="a Draft 2020-12 keyword",
            )
        elif key in _SCHEMA_VALUED:
            yield from _walk(value, where, root)
        elif key in _SCHEMA_LIST_VALUED:
            if isinstance(value, list):
                for i, sub in enumerate(value):
                    yield from _walk(sub, f"{where}.{i}", root)
        elif key in _SCHEMA_MAP_VALUED:
            if isinstance(value, Mapping):
                for name, sub in value.items():
                    if key == "patternProperties":
                        yield from _pattern_refusal(name, f"{where}.{name}")
                    yield from _walk(sub, f"{where}.{name}", root)
        elif key == "pattern":
            yield from _pattern_refusal(value, where)
        elif key == "$schema" and value != DRAFT_2020_12:
            yield error(
                ErrorCode.SCHEMA_UNSUPPORTED_KEYWORD,
                f"schema dialect {value!r} is not supported",
                path=where,
                expected=DRAFT_2020_12,
            )
        elif key == "$ref" and not (isinstance(value, str) and value.startswith("#/$defs/")):
            yield error(
                ErrorCode.SCHEMA_UNSUPPORTED_KEYWORD,
                f"$ref {value!r} is not a local '#/$defs/...' reference",
                path=where,
                expected="a reference of the form '#/$defs/NAME'",
            )
        elif key == "$ref":
            name = value.removeprefix("#/$defs/")
            defs = root.get("$defs")
            # '/' and '~' would make the fragment a deeper JSON pointer than a name.
            if not isinstance(defs, Mapping) or name not in defs or "/" in name or "~" in name:
                yield error(
                    ErrorCode.SCHEMA_INVALID,
                    f"$ref names '{name}', which $defs does not declare",
                    path=where,
                    expected="a name declared under $defs",
                )
        elif key == "format" and isinstance(value, str) and value not in SUPPORTED_FORMATS:
            # A non-string format is left to the metaschema check (SCHEMA_INVALID).
            yield error(
                ErrorCode.SCHEMA_UNSUPPORTED_KEYWORD,
                f"format {value!r} is not enforced",
                path=where,
                expected="one of " + ", ".join(sorted(SUPPORTED_FORMATS)),
            )


def _pattern_refusal(pattern: Any, where: str) -> Iterator[ExecsysError]:
    problem = pattern_problem(pattern)
    if problem is not None:
        yield error(
            ErrorCode.SCHEMA_PATTERN_UNSUPPORTED,
            f"pattern {pattern!r} cannot be matched in linear time: {problem}",
            path=where,
            expected="an RE2 regular expression (no look-around or back-references)",
        )


def _in_place_refs(schema: Any) -> set[str]:
    """Names of ``$defs`` that ``schema`` applies to the *same* instance."""
    found: set[str] = set()
    stack = [schema]
    while stack:
        current = stack.pop()
        if not isinstance(current, Mapping):
            continue
        ref = current.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            found.add(ref.removeprefix("#/$defs/"))
        stack.extend(current.get(key) for key in ("not", "if", "then", "else"))
        for key in ("allOf", "anyOf", "oneOf"):
            if isinstance(current.get(key), list):
                stack.extend(current[key])
        if isinstance(current.get("dependentSchemas"), Mapping):
            stack.extend(current["dependentSchemas"].values())
    return found


def _ref_cycle(root: Mapping[str, Any]) -> str | None:
    """A ``$defs`` name on a ``$ref`` cycle that never descends into the instance.

    Such a cycle (``a: {$ref: '#/$defs/a'}``) validates nothing: the validator
    recurses until the interpreter's limit.
    """
    defs = root.get("$defs")
    if not isinstance(defs, Mapping):
        return None
    edges = {name: sorted(_in_place_refs(sub) & set(defs)) for name, sub in defs.items()}
    done: set[str] = set()
    for first in edges:
        if first in done:
            continue
        on_path = {first}
        work = [(first, iter(edges[first]))]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                on_path.discard(node)
                done.add(node)
            elif child in on_path:
                return str(child)
            elif child not in done:
                on_path.add(child)
                work.append((child, iter(edges[child])))
    return None


def check_schema(schema: Any, path: str) -> None:
    """Refuse ``schema`` unless every keyword is known, supported and well-formed.

    Raises the first problem found as an :class:`ExecsysError`.
    """
    root = schema if isinstance(schema, Mapping) else {}
    for problem in _walk(schema, path, root):
        raise problem
    cycle = _ref_cycle(root)
    if cycle is not None:
        raise error(
            ErrorCode.SCHEMA_INVALID,
            f"'$defs/{cycle}' refers back to itself without descending into a value",
            path=f"{path}.$defs.{cycle}",
            expected="a recursive $ref only below properties, items or similar",
        )
    verdict = _metaschema_problem(json.dumps(schema, sort_keys=True))
    if verdict is not None:
        message, parts = verdict
        raise error(
            ErrorCode.SCHEMA_INVALID,
            f"invalid JSON Schema: {message}",
            path=".".join([path, *parts]),
            expected="a valid Draft 2020-12 schema",
        )


@lru_cache(maxsize=4096)
def _metaschema_problem(key: str) -> tuple[str, tuple[str, ...]] | None:
    # Checking against the metaschema costs ~0.3 ms; specs repeat the same
    # small port schemas many times, so the verdict is cached by content.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(json.loads(key))
    except SchemaError as exc:
        return exc.message, tuple(str(p) for p in exc.absolute_path)
    return None


@lru_cache(maxsize=1)
def _linear_validator() -> type[Draft202012Validator]:
    """Draft 2020-12 with every regular-expression keyword matched by RE2."""
    from jsonschema import Draft202012Validator, validators

    cls: type[Draft202012Validator] = validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator, _RE2_KEYWORDS
    )
    return cls


@lru_cache(maxsize=4096)
def _validator_for(key: bytes) -> Draft202012Validator:
    return _linear_validator()(json.loads(key), format_checker=_format_checker())


def validator_for(schema: Any) -> Draft202012Validator:
    """Return a (cached) validator for an already checked schema."""
    return _validator_for(canonical_bytes(schema))


def validation_problem(schema: Any, instance: Any) -> tuple[str, str] | None:
    """Validate ``instance``; return ``(path, message)`` of the first problem or ``None``."""
    validator = validator_for(schema)
    best = None
    for problem in validator.iter_errors(instance):
        if best is None or list(problem.absolute_path) < list(best.absolute_path):
            best = problem
    if best is None:
        return None
    return ".".join(str(p) for p in best.absolute_path), best.message


def enum_values(schema: Any) -> list[Any] | None:
    """Return the closed set of values ``schema`` admits, or ``None`` if it is open.

    Recognises ``{"enum": [...]}`` and ``{"const": x}`` (possibly with a ``type``).
    """
    if not isinstance(schema, Mapping):
        return None
    if "enum" in schema and isinstance(schema["enum"], list):
        return list(schema["enum"])
    if "const" in schema:
        return [schema["const"]]
    return None
