"""A plain-Python check that an event's fields satisfy the event schema.

The audit checks every event against ``JournalEvent``'s schema (types,
patterns, bounds, no unknown nested members). pydantic does that exactly but
costs more than the rest of an event's framing. :class:`EventCheck` answers
"certainly valid" for the fields the Journal writes, with plain type tests,
length bounds and ASCII patterns, each at least as strict as the schema's; when
it cannot say so, the caller runs the pydantic validator, which decides and
words the refusal. It never refuses anything itself, so it can only save work,
never change a verdict (the tests compare it with pydantic on generated and
mutated events).

Top-level members are not checked here: every caller gets them from the line
framing, which already pins the exact member set.
"""

from __future__ import annotations

import re
from typing import Any, Final

from contracts._journal import MAX_JOURNAL_INT, ActorKind, NodeState, Transition

_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}").fullmatch
_NODE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}").fullmatch
_TIME: Final = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z"
).fullmatch

_STATES: Final = frozenset(state.value for state in NodeState)
_TRANSITIONS: Final = frozenset(transition.value for transition in Transition)
_KINDS: Final = frozenset(kind.value for kind in ActorKind)

_ACTOR: Final = frozenset({"id", "kind", "role"})
_REF: Final = frozenset({"kind", "id", "digest"})
_ATTEMPT: Final = frozenset({"id", "sequence"})
_APPROVAL: Final = frozenset({"actor", "kind", "role", "record"})
_ERROR: Final = frozenset({"code", "message"})
_ACTIVATION: Final = frozenset({"node", "activation"})
_BATCH: Final = frozenset({"index", "size"})
_INVALIDATION: Final = frozenset({"source", "policy"})
_SUCCESSOR: Final = frozenset({"execution", "header"})
_TEXT_LIMIT: Final = 4096


def _token(value: object) -> bool:
    return type(value) is str and 0 < len(value) <= 256


def _count(value: object) -> bool:
    return type(value) is int and 0 < value <= MAX_JOURNAL_INT


def _digest(value: object) -> bool:
    return type(value) is str and _DIGEST(value) is not None


def _ref(value: object) -> bool:
    return (
        type(value) is dict
        and value.keys() == _REF
        and _token(value["kind"])
        and _token(value["id"])
        and _digest(value["digest"])
    )


class EventCheck:
    """Says whether an event's fields certainly satisfy the event schema.

    Node ids and actors, which repeat from event to event, are remembered once
    seen valid (one instance per journal, so what it remembers stays small).
    """

    __slots__ = ("_actors", "_nodes")

    def __init__(self) -> None:
        self._nodes: set[str] = set()
        self._actors: set[tuple[object, object, object]] = set()

    def _node(self, value: object) -> bool:
        if type(value) is not str:
            return False
        if value in self._nodes:
            return True
        if _NODE(value) is not None:
            self._nodes.add(value)
            return True
        return False

    def _actor(self, value: object) -> bool:
        if type(value) is not dict or value.keys() != _ACTOR:
            return False
        triple = (value["id"], value["kind"], value["role"])
        role = triple[2]
        if type(triple[0]) is not str or type(triple[1]) is not str:
            return False
        if role is not None and type(role) is not str:
            return False
        if triple in self._actors:
            return True
        if _token(triple[0]) and triple[1] in _KINDS and (role is None or _token(role)):
            self._actors.add(triple)
            return True
        return False

    def valid(self, event: dict[str, Any], *, chained: bool = False) -> bool:
        """True only if ``event`` (the fields of an event line) passes the event schema.

        ``chained``: the chain check has accepted the event, which pins
        ``execution`` (the validated header's), ``ordinal`` (its position) and
        ``prior`` (a digest computed by the reader), so those are not re-checked.
        """
        prior_state, result_state, transition = (
            event["prior_state"],
            event["result_state"],
            event["transition"],
        )
        rationale, time = event["rationale"], event["time"]
        if not (
            event["record"] == "event"
            and (
                chained
                or (
                    _token(event["execution"])
                    and _count(event["ordinal"])
                    and _digest(event["prior"])
                )
            )
            and _token(event["request"])
            and _digest(event["request_digest"])
            and self._node(event["node"])
            and _count(event["activation"])
            and type(prior_state) is str
            and prior_state in _STATES
            and type(result_state) is str
            and result_state in _STATES
            and type(transition) is str
            and transition in _TRANSITIONS
            and self._actor(event["actor"])
            and type(time) is str
            and _TIME(time) is not None
            and type(rationale) is str
            and len(rationale) <= _TEXT_LIMIT
        ):
            return False
        return self._optional(event)

    def _optional(self, event: dict[str, Any]) -> bool:
        attempt, refs, approvals = event["attempt"], event["refs"], event["approvals"]
        predecessors, failure = event["predecessors"], event["error"]
        authorization, batch = event["authorization"], event["batch"]
        invalidation, successor = event["invalidation"], event["successor"]
        return (
            (
                attempt is None
                or (
                    type(attempt) is dict
                    and attempt.keys() == _ATTEMPT
                    and _token(attempt["id"])
                    and _count(attempt["sequence"])
                )
            )
            and type(refs) is list
            and (not refs or all(map(_ref, refs)))
            and (authorization is None or _ref(authorization))
            and type(approvals) is list
            and (not approvals or all(map(self._approval, approvals)))
            and (
                failure is None
                or (
                    type(failure) is dict
                    and failure.keys() == _ERROR
                    and _token(failure["code"])
                    and type(failure["message"]) is str
                    and len(failure["message"]) <= _TEXT_LIMIT
                )
            )
            and type(predecessors) is list
            and (not predecessors or all(map(self._activation, predecessors)))
            and (
                batch is None
                or (
                    type(batch) is dict
                    and batch.keys() == _BATCH
                    and _count(batch["index"])
                    and _count(batch["size"])
                )
            )
            and (
                invalidation is None
                or (
                    type(invalidation) is dict
                    and invalidation.keys() == _INVALIDATION
                    and _ref(invalidation["source"])
                    and _token(invalidation["policy"])
                )
            )
            and (
                successor is None
                or (
                    type(successor) is dict
                    and successor.keys() == _SUCCESSOR
                    and _token(successor["execution"])
                    and _digest(successor["header"])
                )
            )
        )

    def _approval(self, value: object) -> bool:
        return (
            type(value) is dict
            and value.keys() == _APPROVAL
            and _token(value["actor"])
            and type(value["kind"]) is str
            and value["kind"] in _KINDS
            and _token(value["role"])
            and _ref(value["record"])
        )

    def _activation(self, value: object) -> bool:
        return (
            type(value) is dict
            and value.keys() == _ACTIVATION
            and self._node(value["node"])
            and _count(value["activation"])
        )
