"""Reading user documents (specs, inputs, configs, policies) safely.

Every document goes through :func:`load_document`: a bounded size, UTF-8 text,
YAML or JSON, no duplicate keys, no YAML anchors/aliases (they let a small file
expand into a huge one), a bounded nesting depth. Anything else is one
catalogued error, never a traceback.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from contracts import MAX_EXACT_INTEGER, ErrorCode, error, number_problem
from contracts._gc import collector_paused

#: Largest document accepted, in bytes. Specs of thousands of nodes fit easily.
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
#: Deepest nesting accepted (objects and arrays).
MAX_DEPTH = 64


_RESOLVE: Any = Resolver.resolve


class _Strict:
    """The strictness rules, shared by the libyaml-backed loader and the pure-Python one.

    Both compose nodes with PyYAML's Python composer, so an alias, an anchor or
    a nesting too deep for the recursion limit is seen here whichever parser
    produced the events; only scanning and parsing move to C when libyaml is
    installed (several times faster on a large spec).
    """

    def compose_node(self, parent: Any, index: Any) -> Any:
        loader: Any = self
        if loader.check_event(yaml.AliasEvent):
            event = loader.peek_event()
            raise _Refusal(
                ErrorCode.YAML_ALIAS_REFUSED,
                "YAML aliases are not accepted",
                f"line {event.start_mark.line + 1}",
            )
        if loader.check_event(yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent):
            event = loader.peek_event()
            if getattr(event, "anchor", None):
                raise _Refusal(
                    ErrorCode.YAML_ALIAS_REFUSED,
                    "YAML anchors are not accepted",
                    f"line {event.start_mark.line + 1}",
                )
        return Composer.compose_node(loader, parent, index)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        """PyYAML's tag resolution, remembered per distinct scalar within one document.

        A spec repeats the same keys and values on every node, and resolving a
        plain scalar tries the implicit-type patterns one by one (most of a large
        spec's load time). Without path resolvers, which no loader here has, the
        tag depends only on these three arguments.
        """
        loader: Any = self
        if loader.yaml_path_resolvers:  # pragma: no cover - none are registered
            return _RESOLVE(loader, kind, value, implicit)
        memo: dict[Any, Any] | None = loader.__dict__.get("_resolved")
        if memo is None:
            memo = loader.__dict__["_resolved"] = {}
        key = (kind, value, implicit)
        tag = memo.get(key)
        if tag is None:
            tag = memo[key] = _RESOLVE(loader, kind, value, implicit)
        return tag

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        loader: Any = self
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            if key in seen:
                raise _Refusal(
                    ErrorCode.DUPLICATE_KEY,
                    f"key {key!r} appears twice",
                    f"line {key_node.start_mark.line + 1}",
                )
            seen.add(key)
        return SafeConstructor.construct_mapping(loader, node, deep=deep)


class _StrictLoader(_Strict, yaml.SafeLoader):
    """Pure-Python SafeLoader that refuses aliases, anchors and duplicate keys."""


_CParser: Any
try:
    from yaml._yaml import CParser as _CParser
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    _CParser = None

if _CParser is not None:

    class _StrictCLoader(_Strict, Composer, _CParser, SafeConstructor, Resolver):  # type: ignore[misc]
        """libyaml's parser (events) under the Python composer and the strict rules."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)

    _LOADER: type[Any] = _StrictCLoader
else:  # pragma: no cover - PyYAML built without libyaml
    _LOADER = _StrictLoader


# Timestamps and other implicit YAML types would not survive JSON; keep them strings.
_loader: type[Any]
for _loader in (_StrictLoader, _LOADER):
    _loader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in Resolver.yaml_implicit_resolvers.items()
    }


class _Refusal(Exception):
    def __init__(self, code: ErrorCode, message: str, where: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.where = where


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Refusal(ErrorCode.DUPLICATE_KEY, f"key {key!r} appears twice", "")
        result[key] = value
    return result


def _depth_ok(value: Any) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if depth > MAX_DEPTH:
            return False
        if isinstance(current, dict):
            stack.extend((v, depth + 1) for v in current.values())
        elif isinstance(current, list):
            stack.extend((v, depth + 1) for v in current)
    return True


def parse_document(data: bytes, *, name: str, json_only: bool = False) -> Any:
    """Parse bytes as YAML (a superset of JSON) or, if ``json_only``, strict JSON."""
    if len(data) > MAX_DOCUMENT_BYTES:
        # Reading stops one byte past the bound, so the true size is unknown here.
        raise error(
            ErrorCode.FILE_TOO_LARGE,
            f"document is more than {MAX_DOCUMENT_BYTES} bytes",
            path=name,
            expected=f"at most {MAX_DOCUMENT_BYTES} bytes",
        )
    if not data.strip():
        raise error(ErrorCode.FILE_EMPTY, "document is empty", path=name)
    if b"\x00" in data:
        raise error(ErrorCode.FILE_NOT_TEXT, "document contains NUL bytes", path=name)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            ErrorCode.FILE_NOT_TEXT,
            f"document is not UTF-8 (byte {exc.start})",
            path=name,
            expected="UTF-8 text",
        ) from None
    limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(max(limit, 4 * MAX_DEPTH + 200))
        with collector_paused():
            if json_only:
                value = json.loads(text, object_pairs_hook=_no_duplicates)
            else:
                value = yaml.load(text, Loader=_LOADER)
    except _Refusal as exc:
        where = f"{name}:{exc.where}" if exc.where else name
        raise error(exc.code, exc.message, path=where) from None
    except RecursionError:
        raise error(
            ErrorCode.DOCUMENT_TOO_DEEP,
            "document nests too deeply",
            path=name,
            expected=f"at most {MAX_DEPTH} levels",
        ) from None
    except json.JSONDecodeError as exc:
        raise error(
            ErrorCode.PARSE_ERROR,
            f"invalid JSON: {exc.msg}",
            path=f"{name}:line {exc.lineno}",
        ) from None
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):  # libyaml's own bound (1,000 levels)
            raise error(
                ErrorCode.DOCUMENT_TOO_DEEP,
                "document nests too deeply",
                path=name,
                expected=f"at most {MAX_DEPTH} levels",
            ) from None
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:line {mark.line + 1}" if mark is not None else name
        problem = getattr(exc, "problem", None) or "malformed document"
        raise error(ErrorCode.PARSE_ERROR, f"invalid YAML: {problem}", path=where) from None
    except (ValueError, TypeError) as exc:
        raise error(ErrorCode.PARSE_ERROR, f"unreadable document: {exc}", path=name) from None
    finally:
        sys.setrecursionlimit(limit)
    if not _depth_ok(value):
        raise error(
            ErrorCode.DOCUMENT_TOO_DEEP,
            "document nests too deeply",
            path=name,
            expected=f"at most {MAX_DEPTH} levels",
        )
    _check_json_native(value, name)
    return value


def _check_json_native(value: Any, name: str) -> None:
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        current, where = stack.pop()
        at = f"{name}:{where}" if where else name
        if isinstance(current, dict):
            for key, sub in current.items():
                if not isinstance(key, str):
                    raise error(
                        ErrorCode.PARSE_ERROR,
                        f"mapping key {key!r} is not a string",
                        path=name,
                        expected="string keys (quote keys like 1, true or null)",
                    )
                stack.append((sub, f"{where}.{key}" if where else key))
        elif isinstance(current, list):
            stack.extend(
                (sub, f"{where}.{i}" if where else str(i)) for i, sub in enumerate(current)
            )
        elif isinstance(current, float) and current != current:  # NaN
            raise error(ErrorCode.PARSE_ERROR, "NaN is not JSON", path=at)
        elif isinstance(current, bool) or current is None or isinstance(current, str):
            continue
        elif isinstance(current, int | float):
            problem = number_problem(current)
            if problem is not None:
                raise error(
                    ErrorCode.DOCUMENT_NUMBER_OUT_OF_RANGE,
                    problem,
                    path=at,
                    expected=f"a finite number; integers within +/-{MAX_EXACT_INTEGER}",
                )
        else:
            raise error(
                ErrorCode.PARSE_ERROR,
                f"value of type {type(current).__name__} is not JSON",
                path=at,
            )


def read_bytes(path: str | Path) -> bytes:
    """Read a file (or ``-`` for stdin) with the size bound applied before reading it all.

    Only regular files are read by name: a FIFO, socket or device could block
    forever or never end, so it is refused (stream it through ``-`` instead).
    """
    if str(path) == "-":
        data = sys.stdin.buffer.read(MAX_DOCUMENT_BYTES + 1)
        return data
    p = Path(path)
    try:
        # Non-blocking: opening a FIFO nobody writes would otherwise wait forever.
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise error(ErrorCode.FILE_NOT_FOUND, "no such file", path=str(path)) from None
    except IsADirectoryError:
        raise error(
            ErrorCode.FILE_NOT_FOUND, "is a directory", path=str(path), expected="a file"
        ) from None
    except OSError as exc:
        raise error(
            ErrorCode.FILE_NOT_FOUND, f"cannot read: {exc.strerror}", path=str(path)
        ) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise error(
                ErrorCode.FILE_NOT_FOUND, "is a directory", path=str(path), expected="a file"
            )
        raise error(
            ErrorCode.FILE_NOT_REGULAR,
            "is not a regular file (a FIFO, socket or device)",
            path=str(path),
            expected="a regular file, or '-' to read standard input",
        )
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > MAX_DOCUMENT_BYTES:
            raise error(
                ErrorCode.FILE_TOO_LARGE,
                f"document is {info.st_size} bytes",
                path=str(path),
                expected=f"at most {MAX_DOCUMENT_BYTES} bytes",
            )
        try:
            return handle.read(MAX_DOCUMENT_BYTES + 1)
        except OSError as exc:
            raise error(
                ErrorCode.FILE_NOT_FOUND, f"cannot read: {exc.strerror}", path=str(path)
            ) from None


def load_document(path: str | Path) -> Any:
    """Read and parse a YAML or JSON document (``.json`` files are parsed as strict JSON)."""
    data = read_bytes(path)
    name = "<stdin>" if str(path) == "-" else str(path)
    return parse_document(data, name=name, json_only=str(path).endswith(".json"))
