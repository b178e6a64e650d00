"""Host-owned deterministic operations (``kind: operation`` nodes).

An operation is a pure function of its materialized inputs and of a small,
read-only context (its own site and the visit counts of the delivery), with
no I/O, clock or randomness, so replaying it gives the same outputs. The
registry is closed at Host creation; a spec naming an unregistered operation
is not admitted. Workflows such as CodeClosure register their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class OperationContext:
    """What an operation may know besides its inputs."""

    delivery: str
    """The delivery id."""
    node: str
    """The operation's node."""
    activation: int
    """Which activation of the node this is."""
    visits: Mapping[str, int] = field(default_factory=dict)
    """Node -> how many times it has been visited so far in this delivery."""


Operation = Callable[[Mapping[str, Any], OperationContext], dict[str, Any]]
"""(inputs by input name, context) -> outputs by output port."""


def _echo(inputs: Mapping[str, Any], context: OperationContext) -> dict[str, Any]:
    """Return the inputs unchanged (ports named like the inputs)."""
    return dict(inputs)


def _all_true(inputs: Mapping[str, Any], context: OperationContext) -> dict[str, Any]:
    """``ok`` is true when every present input is true; absent optional inputs are ignored."""
    return {"ok": all(value is True for value in inputs.values())}


def _any_true(inputs: Mapping[str, Any], context: OperationContext) -> dict[str, Any]:
    """``ok`` is true when at least one present input is true."""
    return {"ok": any(value is True for value in inputs.values())}


def _count_present(inputs: Mapping[str, Any], context: OperationContext) -> dict[str, Any]:
    """``count`` is the number of inputs present this round."""
    return {"count": len(inputs)}


OPERATIONS: Mapping[str, Operation] = {
    "echo": _echo,
    "all-true": _all_true,
    "any-true": _any_true,
    "count-present": _count_present,
}
"""The built-in operations every Host registers."""
