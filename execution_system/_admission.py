"""Admission: from a user's documents to an :class:`AdmittedDelivery`, or one error.

``parse_graph`` checks shape (pydantic, unknown keys refused); ``check_graph``
checks meaning (successors, routes, selections, barriers, dataflow, cycles,
reachability, terminals, schema keywords); ``admit`` binds input, authority
policy and executor bindings into a digest-identified delivery.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from contracts import (
    NODE_KINDS,
    ActionNode,
    AdmittedDelivery,
    AuthorityPolicy,
    ControlGraph,
    ErrorCode,
    ExecsysError,
    ExecutorBinding,
    error,
    validation_message,
    validation_problem,
)
from contracts._gc import collector_paused
from execution_system._dataflow import check_dataflow
from execution_system._graphcheck import check_structure
from execution_system._loading import load_document

M = TypeVar("M", bound=BaseModel)

#: The location tag pydantic adds for the object member of ``JsonSchema``.
_SCHEMA_UNION_TAG = "dict[str,any]"


def _path(loc: tuple[int | str, ...]) -> str:
    parts = [str(p) for p in loc]
    # Tagged unions add the tag to the location: nodes.<id>.<kind>.<field>.
    if len(parts) >= 3 and parts[0] == "nodes" and parts[2] in NODE_KINDS:
        del parts[2]
    return ".".join(p for p in parts if p != "[key]")


def shape_error(exc: ValidationError, prefix: str = "") -> Exception:
    """Map the first pydantic error to a catalogued error."""
    first = exc.errors(include_url=False)[0]
    loc = tuple(first["loc"])
    kind = first["type"]
    where = _path(loc)
    if prefix:
        where = f"{prefix}.{where}" if where else prefix
    message = validation_message(first["msg"])
    if loc and loc[-1] == _SCHEMA_UNION_TAG:
        # A JsonSchema (object | boolean) that is neither: pydantic names the
        # first union member in the location; report it as the schema checker would.
        where = where.removesuffix(f".{_SCHEMA_UNION_TAG}").removesuffix(_SCHEMA_UNION_TAG)
        return error(
            ErrorCode.SCHEMA_INVALID,
            "a schema must be an object or a boolean",
            path=where,
            expected="a JSON Schema object",
        )
    if kind == "extra_forbidden":
        return error(
            ErrorCode.SPEC_UNKNOWN_KEY,
            f"unknown key '{loc[-1]}'",
            path=where,
            expected="only the keys documented in docs/spec.md",
        )
    if kind == "missing":
        return error(ErrorCode.SPEC_MISSING_KEY, f"missing key '{loc[-1]}'", path=where)
    if kind in {"union_tag_invalid", "union_tag_not_found"}:
        return error(
            ErrorCode.SPEC_UNKNOWN_NODE_KIND,
            "unknown or missing node kind",
            path=f"{where}.kind",
            expected="kind: " + " | ".join(NODE_KINDS),
        )
    if loc == ("spec",):
        return error(
            ErrorCode.SPEC_UNKNOWN_VERSION,
            f"unsupported spec version {first.get('input')!r}",
            path="spec",
            expected="execution-system/v1",
        )
    keyed = [str(p) for p in loc]
    if "[key]" in keyed and loc[0] == "nodes" and keyed.index("[key]") > 2:
        # A key inside a node (an output port, an input name), not the node's id.
        at = keyed.index("[key]")
        owner = {"outputs": "output port", "inputs": "input"}.get(keyed[at - 2], "key")
        return error(
            ErrorCode.SPEC_INVALID_VALUE,
            f"invalid {owner} name {keyed[at - 1]!r}",
            path=where,
            expected="letters, digits, '_' or '-', starting with a letter or '_' (max 64)",
        )
    if "[key]" in keyed and loc[0] == "nodes":
        return error(
            ErrorCode.SPEC_INVALID_NODE_ID,
            f"invalid node id {loc[1]!r}",
            path=where,
            expected="letters, digits, '_' or '-', starting with a letter or '_' (max 64)",
        )
    if kind == "string_pattern_mismatch" and len(loc) >= 2 and loc[-2] in {"inputs"}:
        return error(
            ErrorCode.SPEC_INVALID_REFERENCE,
            f"invalid reference {first.get('input')!r}",
            path=where,
            expected="input.<field> or <node>.<port>, optionally followed by '?'",
        )
    if kind == "string_pattern_mismatch" and loc and loc[-1] == "select":
        return error(
            ErrorCode.SPEC_INVALID_REFERENCE,
            f"invalid reference {first.get('input')!r}",
            path=where,
            expected="<node>.<port>",
        )
    return error(ErrorCode.SPEC_INVALID_VALUE, message, path=where)


def _json_kind(value: Any) -> str:
    if value is None:
        return "null (no content)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__}"


def _validate_model(model: type[M], document: Any, prefix: str = "") -> M:
    if not isinstance(document, Mapping):
        raise error(
            ErrorCode.SPEC_NOT_A_MAPPING,
            f"document is {_json_kind(document)}",
            path=prefix,
            expected="a mapping",
        )
    try:
        # JSON mode: strict types, but arrays are accepted for tuples.
        return model.model_validate_json(json.dumps(document), strict=True)
    except ValidationError as exc:
        raise shape_error(exc, prefix) from None


def parse_graph(document: Any) -> ControlGraph:
    """Check a parsed spec document's shape; return the frozen graph."""
    with collector_paused():
        return _validate_model(ControlGraph, document)


def check_graph(graph: ControlGraph, operations: frozenset[str] | None = None) -> None:
    """Check a graph's meaning; raise the first violation.

    ``operations`` is the set of registered operation names; ``None`` skips
    that check (``graph check`` without a Host).
    """
    with collector_paused():
        check_structure(graph, operations)
        check_dataflow(graph)


def load_graph(path: str | Path, operations: frozenset[str] | None = None) -> ControlGraph:
    """Load, parse and check a spec file."""
    graph = parse_graph(load_document(path))
    check_graph(graph, operations)
    return graph


def parse_authority(document: Any) -> AuthorityPolicy:
    """Check an authority policy document (``actors`` and ``approver``)."""
    try:
        return _validate_model(AuthorityPolicy, document, "authority")
    except ExecsysError as exc:  # re-coded: every problem here is the policy's
        raise error(ErrorCode.AUTHORITY_INVALID, exc.message, path=exc.path) from None


def admit(
    graph: ControlGraph,
    input_value: Any,
    *,
    authority: AuthorityPolicy | None = None,
    executors: Mapping[str, ExecutorBinding] | None = None,
    operations: frozenset[str] | None = None,
    nonce: str = "",
) -> AdmittedDelivery:
    """Bind a checked graph, its input, policy and executors into a delivery."""
    check_graph(graph, operations)
    problem = validation_problem(graph.input, input_value)
    if problem is not None:
        where, message = problem
        raise error(
            ErrorCode.INPUT_INVALID,
            f"input does not match the input schema: {message}",
            path="input" + (f".{where}" if where else ""),
            expected="a value valid against the graph's input schema",
        )
    if not isinstance(input_value, dict):
        raise error(
            ErrorCode.INPUT_INVALID,
            "input must be a JSON object",
            path="input",
            expected="an object",
        )
    bindings = dict(executors or {})
    if executors is not None:
        for nid, node in graph.nodes.items():
            if isinstance(node, ActionNode) and node.executor not in bindings:
                raise error(
                    ErrorCode.EXECUTOR_UNBOUND,
                    f"executor '{node.executor}' has no binding in the runner config",
                    path=f"nodes.{nid}.executor",
                    expected="an entry under 'executors' in the config",
                )
    used = {n.executor for n in graph.nodes.values() if isinstance(n, ActionNode)}
    return AdmittedDelivery(
        graph=graph,
        input=input_value,
        authority=authority or AuthorityPolicy(),
        executors={k: v for k, v in bindings.items() if k in used},
        nonce=nonce,
    )
