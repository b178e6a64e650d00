"""Host-side validation of a proposal before it may enter committed state.

LangGraph validates state only when the next node reads it, after the bad
write was checkpointed; so every output is validated here, against the
admitted schema, before it is previewed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts import ErrorCode, JsonSchema, Routes, error, validation_problem


def validate_outputs(
    node_id: str, declared: Mapping[str, JsonSchema], output: Any
) -> dict[str, Any]:
    """Check an executor's outputs against the node's declared ports; return them."""
    base = f"nodes.{node_id}.outputs"
    if not isinstance(output, dict):
        raise error(
            ErrorCode.OUTPUT_SCHEMA_VIOLATION,
            f"output is a {type(output).__name__}",
            path=base,
            expected="an object of output ports",
        )
    for port in output:
        if port not in declared:
            raise error(
                ErrorCode.OUTPUT_UNDECLARED_PORT,
                f"output port '{port}' is not declared",
                path=f"{base}.{port}",
                expected="one of " + ", ".join(sorted(declared)) if declared else "no outputs",
            )
    for port, schema in declared.items():
        if port not in output:
            raise error(
                ErrorCode.OUTPUT_MISSING_PORT,
                f"output port '{port}' was not produced",
                path=f"{base}.{port}",
                expected="every declared port",
            )
        problem = validation_problem(schema, output[port])
        if problem is not None:
            where, message = problem
            raise error(
                ErrorCode.OUTPUT_SCHEMA_VIOLATION,
                f"port '{port}': {message}",
                path=f"{base}.{port}" + (f".{where}" if where else ""),
                expected="a value valid against the port's schema",
            )
    return dict(output)


def route_target(node_id: str, routes: Routes, output: Mapping[str, Any]) -> str:
    """The successor chosen by a routes port value."""
    value = output.get(routes.port)
    if not isinstance(value, str) or value not in routes.cases:
        raise error(
            ErrorCode.ROUTE_VALUE_UNDECLARED,
            f"route value {value!r} has no declared successor",
            path=f"nodes.{node_id}.routes.cases",
            expected="one of " + ", ".join(routes.cases),
        )
    return routes.cases[value]
