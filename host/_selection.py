"""Parallel selection: a planner's value must name a declared, non-empty subset."""

from __future__ import annotations

from typing import Any

from contracts import ErrorCode, ExecsysError, ParallelNode, error


def check_selection(node_id: str, node: ParallelNode, value: Any) -> list[str]:
    """Return the selected branches in declaration order, or raise with a stable code.

    ``value`` is the committed value of the node's ``select`` port; ``None``
    (no ``select``) selects every branch.
    """
    if node.select is None:
        return list(node.branches)
    path = f"nodes.{node_id}.select"
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise error(
            ErrorCode.SELECTION_UNDECLARED,
            f"selection {value!r} is not a list of branch names",
            path=path,
            expected="a list of names from " + ", ".join(node.branches),
        )
    if not value:
        raise error(
            ErrorCode.SELECTION_EMPTY,
            "the selection is empty",
            path=path,
            expected="at least one of " + ", ".join(node.branches),
        )
    unknown = [v for v in value if v not in node.branches]
    if unknown:
        raise error(
            ErrorCode.SELECTION_UNDECLARED,
            f"selection names undeclared branch {unknown[0]!r}",
            path=path,
            expected="names from " + ", ".join(node.branches),
        )
    if len(set(value)) != len(value):
        dup = next(v for v in value if value.count(v) > 1)
        raise error(
            ErrorCode.SELECTION_DUPLICATE,
            f"selection names branch {dup!r} twice",
            path=path,
            expected="each branch at most once",
        )
    missing = [r for r in node.required if r not in value]
    if missing:
        raise error(
            ErrorCode.SELECTION_MISSING_REQUIRED,
            f"selection omits required branch {missing[0]!r}",
            path=path,
            expected="every required branch: " + ", ".join(node.required),
        )
    chosen = set(value)
    return [b for b in node.branches if b in chosen]


def is_selection_error(exc: ExecsysError) -> bool:
    """Whether ``exc`` is one of the selection refusals."""
    return exc.code.value.startswith("SELECTION_")
