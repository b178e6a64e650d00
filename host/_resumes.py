"""Which answers and resolutions a suspended delivery admits (substrate-free rules).

An action-input answer must quote the correlation of a question pending now
(not an answered, stale or unknown one, and not a workflow wait's). A
workflow-wait resolution must come for a wait pending now, with a result valid
against the wait's schema, from an actor the delivery's authority policy admits
in a role the wait accepts; a second approval must come from another actor
where the wait asks for distinct actors, and say the same as the earlier ones.
"""

from __future__ import annotations

import json
from typing import Any

from contracts import AdmittedDelivery, ErrorCode, WaitNode, error, validation_problem


def match_correlation(delivery_id: str, values: dict[str, Any], correlation: str) -> str:
    """The node whose pending question ``correlation`` names; refuses stale, used or unknown."""
    suspensions = values.get("suspensions") or {}
    for node, suspension in suspensions.items():
        if suspension.get("correlation") == correlation:
            return str(node)
    known = (values.get("correlations") or {}).get(correlation)
    if known == "answered":
        raise error(
            ErrorCode.CORRELATION_USED, "this question was already answered", path=correlation
        )
    if known == "stale":
        raise error(
            ErrorCode.CORRELATION_STALE, "this question is no longer pending", path=correlation
        )
    if values.get("waits") and not suspensions:
        raise error(
            ErrorCode.SUSPENSION_KIND_MISMATCH,
            "the delivery waits for a workflow wait, not an action-input",
            path=delivery_id,
            expected="'execsys resolve'",
        )
    raise error(
        ErrorCode.CORRELATION_UNKNOWN,
        "no pending question has this correlation",
        path=correlation,
        expected=f"a correlation shown by 'execsys status {delivery_id}' or 'execsys inspect'",
    )


def check_resolution(
    delivery: AdmittedDelivery,
    values: dict[str, Any],
    node: str,
    actor: str,
    role: str,
    result: Any,
) -> None:
    """Refuse a resolution the wait, its schema or the authority policy does not admit."""
    spec = delivery.graph.nodes.get(node)
    waits = values.get("waits") or {}
    if node in (values.get("suspensions") or {}):
        raise error(
            ErrorCode.SUSPENSION_KIND_MISMATCH,
            f"'{node}' is waiting for an action-input answer, not a resolution",
            path=node,
            expected="'execsys input'",
        )
    if not isinstance(spec, WaitNode) or node not in waits:
        raise error(
            ErrorCode.WAIT_NOT_PENDING,
            f"no workflow wait is pending at '{node}'",
            path=node,
            expected="a wait node shown by 'execsys status'",
        )
    problem = validation_problem(spec.result, result)
    if problem is not None:
        raise error(
            ErrorCode.WAIT_RESULT_INVALID,
            f"result: {problem[1]}",
            path=f"result.{problem[0]}".rstrip("."),
            expected="a value valid against the wait's result schema",
        )
    roles = delivery.authority.roles_of(actor)
    if actor not in delivery.authority.actors:
        raise error(
            ErrorCode.ACTOR_NOT_ADMITTED,
            f"actor '{actor}' is not in the delivery's authority policy",
            path=actor,
        )
    if role not in roles:
        raise error(
            ErrorCode.ROLE_NOT_ADMITTED,
            f"the authority policy does not give '{actor}' the role '{role}'",
            path=role,
            expected="one of " + ", ".join(sorted(roles)),
        )
    if role not in spec.authority.roles:
        raise error(
            ErrorCode.ROLE_NOT_ADMITTED,
            f"role '{role}' cannot resolve '{node}'",
            path=role,
            expected="one of " + ", ".join(spec.authority.roles),
        )
    pending = waits[node]
    if spec.authority.distinct_actors and any(
        a["actor"] == actor for a in pending.get("approvals", [])
    ):
        raise error(
            ErrorCode.APPROVAL_DUPLICATE_ACTOR,
            f"'{actor}' already approved this wait",
            path=actor,
            expected="an approval from a different actor",
        )
    if pending.get("approvals") and pending.get("result") != result:
        earlier = pending.get("result")
        fields = (
            sorted(
                k for k in set(earlier) | set(result) if earlier.get(k, ...) != result.get(k, ...)
            )
            if isinstance(earlier, dict) and isinstance(result, dict)
            else []
        )
        named = ", ".join(f"'{k}'" for k in fields) or "its value"
        raise error(
            ErrorCode.WAIT_RESULT_INVALID,
            f"the result differs from the earlier approvals of this wait in {named}",
            path=f"result.{fields[0]}" if len(fields) == 1 else "result",
            expected=f"the same result as the earlier approvals: {json.dumps(earlier)[:200]}",
        )
