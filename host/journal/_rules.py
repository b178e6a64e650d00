"""The append rules: whether one event may follow the journal's current state.

:func:`check_event` is called for every event, both when it is appended and
when a stored journal is replayed; it never mutates the state. It reads the
event's JSON fields (``event_fields``: the very values the record's digest
covers), so what is checked is exactly what is hashed and stored. Checks run
in a fixed order so one bad event always yields the same code: node and
activation, prior state, transition table, payload shape, transition-specific
rules (dependencies, attempts, outputs, invalidation, successor), authority,
approvals, then batch and request bookkeeping.
"""

from __future__ import annotations

from typing import Any

from contracts._errors import ErrorCode, error
from contracts._journal import (
    TRANSITIONS,
    ActorKind,
    NodeDecl,
    RecordRef,
    Transition,
)
from host.journal._codec import at
from host.journal._state import (
    HUMAN_STEPS,
    LIVE_STATES,
    STATE_OF,
    TRANSITION_OF,
    Key,
    NodeRule,
    ReplayState,
)

Fields = dict[str, Any]
"""An event's JSON fields (``event_fields(event)``)."""

#: Transitions that bind the activation's attempt.
_ATTEMPT_STEPS = HUMAN_STEPS
#: Transitions recorded only as part of a batch command.
_BATCH_STEPS = frozenset({Transition.WORK_INVALIDATED, Transition.SUCCESSOR_BOUND})
# Members bound once: an enum attribute look-up is a descriptor call on every use.
_DEPENDENCIES_SATISFIED = Transition.DEPENDENCIES_SATISFIED
_WORK_STARTED = Transition.WORK_STARTED
_WORK_COMPLETED = Transition.WORK_COMPLETED
_RETRY_AUTHORIZED = Transition.RETRY_AUTHORIZED
_WORK_INVALIDATED = Transition.WORK_INVALIDATED
_SUCCESSOR_BOUND = Transition.SUCCESSOR_BOUND
_AUTOMATION = ActorKind.AUTOMATION.value
_HUMAN = ActorKind.HUMAN.value
#: The record kind a human or hybrid completion must reference (its conduct record).
CONDUCT_KIND = "conduct"


def check_event(state: ReplayState, event: Fields) -> None:
    """Raise the first rule ``event`` breaks against ``state``; return if it is admitted."""
    where = event["ordinal"]
    node = event["node"]
    rule = _known_node(state, node, where)
    key = (node, event["activation"])
    _check_activation(state, key, where)
    current = state.state_of(key)
    transition = TRANSITION_OF[event["transition"]]
    if STATE_OF[event["prior_state"]] is not current:
        raise error(
            ErrorCode.JOURNAL_PRIOR_STATE_MISMATCH,
            f"{node}#{key[1]} is {current.value}",
            path=at(where),
            expected=event["prior_state"],
        )
    result = TRANSITIONS.get((current, transition))
    if result is None:
        code = (
            ErrorCode.JOURNAL_BAD_SUCCESSOR
            if transition is _SUCCESSOR_BOUND
            else ErrorCode.JOURNAL_INVALID_TRANSITION
        )
        raise error(
            code, f"{transition.value} is not admitted from {current.value}", path=at(where)
        )
    if STATE_OF[event["result_state"]] is not result:
        raise error(
            ErrorCode.JOURNAL_INVALID_TRANSITION,
            f"{transition.value} from {current.value} leads to {result.value}",
            path=at(where),
            expected=result.value,
        )
    _check_payload(event, transition, where)
    _check_transition(state, rule, event, transition, key, where)
    _check_actor(state, rule, event, transition, where)
    if transition is _WORK_COMPLETED:
        _check_approvals(state, rule.decl, event, where)
    _check_batch(state, event, transition, key, where)


def _known_node(state: ReplayState, node: str, where: int) -> NodeRule:
    rule = state.rules.get(node)
    if rule is None:
        raise error(
            ErrorCode.JOURNAL_UNKNOWN_NODE, f"node {node!r} is not declared", path=at(where)
        )
    return rule


def _check_activation(state: ReplayState, key: Key, where: int) -> None:
    if key in state.activations:
        return
    node, number = key
    latest = state.latest.get(node, 0)
    if number != latest + 1:
        raise error(
            ErrorCode.JOURNAL_ACTIVATION_INVALID,
            f"{node} has no activation {number}",
            path=at(where),
            expected=f"an existing activation or {latest + 1}",
        )
    if latest and state.activations[(node, latest)].state in LIVE_STATES:
        raise error(
            ErrorCode.JOURNAL_ACTIVATION_INVALID,
            f"{node}#{latest} is still {state.activations[(node, latest)].state.value}",
            path=at(where),
        )


def _check_payload(event: Fields, transition: Transition, where: int) -> None:
    """Each optional member belongs to particular transitions only."""
    attempt_step = transition in _ATTEMPT_STEPS
    if (event["attempt"] is not None) != attempt_step:
        raise error(
            ErrorCode.JOURNAL_ATTEMPT_INVALID,
            f"{transition.value} "
            + ("must bind an attempt" if attempt_step else "binds no attempt"),
            path=at(where),
        )
    if (event["authorization"] is not None) != (transition is _RETRY_AUTHORIZED):
        raise error(
            ErrorCode.JOURNAL_RETRY_UNAUTHORIZED,
            "a retry needs an explicit authorization and only a retry carries one",
            path=at(where),
        )
    if event["predecessors"] and transition is not _DEPENDENCIES_SATISFIED:
        raise error(
            ErrorCode.JOURNAL_DEPENDENCY_GAP,
            "only dependencies-satisfied names predecessors",
            path=at(where),
        )
    if event["approvals"] and transition is not _WORK_COMPLETED:
        raise error(
            ErrorCode.JOURNAL_APPROVAL_INVALID,
            "only a completion carries approvals",
            path=at(where),
        )
    batch_step = transition in _BATCH_STEPS
    if (event["batch"] is not None) != batch_step:
        raise error(
            ErrorCode.JOURNAL_INVALID_TRANSITION,
            f"{transition.value} is "
            + ("only recorded in a batch" if batch_step else "never batched"),
            path=at(where),
        )
    if (event["invalidation"] is not None) != (transition is _WORK_INVALIDATED):
        raise error(
            ErrorCode.JOURNAL_INVALIDATION_SOURCE,
            "invalidation data belongs to work-invalidated and is required there",
            path=at(where),
        )
    if (event["successor"] is not None) != (transition is _SUCCESSOR_BOUND):
        raise error(
            ErrorCode.JOURNAL_BAD_SUCCESSOR,
            "successor data belongs to successor-bound and is required there",
            path=at(where),
        )


def _check_transition(
    state: ReplayState,
    rule: NodeRule,
    event: Fields,
    transition: Transition,
    key: Key,
    where: int,
) -> None:
    record = state.activations.get(key)
    if transition is _DEPENDENCIES_SATISFIED:
        _check_dependencies(state, rule, event, where)
    elif transition is _WORK_STARTED:
        attempt = event["attempt"]  # not None: guaranteed by _check_payload
        attempts = record.attempts if record is not None else []
        if attempt["sequence"] != len(attempts) + 1 or any(
            old.id == attempt["id"] for old in attempts
        ):
            raise error(
                ErrorCode.JOURNAL_ATTEMPT_INVALID,
                f"attempt {attempt['id']!r} #{attempt['sequence']} does not continue "
                f"{len(attempts)} earlier attempt(s) with a fresh id",
                path=at(where),
                expected=f"sequence {len(attempts) + 1}",
            )
    elif transition in _ATTEMPT_STEPS:
        attempt = event["attempt"]
        current = record.open_attempt() if record is not None else None
        if (
            current is None
            or current.id != attempt["id"]
            or current.sequence != attempt["sequence"]
        ):
            raise error(
                ErrorCode.JOURNAL_ATTEMPT_INVALID,
                f"attempt {attempt['id']!r} #{attempt['sequence']} is not the open attempt",
                path=at(where),
                expected=f"{current.id} #{current.sequence}" if current else "",
            )
        if transition is _WORK_COMPLETED:
            _check_outputs(rule, event, where)
    elif transition is _WORK_INVALIDATED:
        source = event["invalidation"]["source"]
        if state.resolver is not None and not state.resolver(RecordRef(**source)):
            raise error(
                ErrorCode.JOURNAL_INVALIDATION_SOURCE,
                f"source {source['kind']}/{source['id']} does not resolve",
                path=at(where),
            )
    elif transition is _SUCCESSOR_BOUND:
        if event["successor"]["execution"] == state.header.execution:
            raise error(
                ErrorCode.JOURNAL_BAD_SUCCESSOR,
                "an execution cannot succeed itself",
                path=at(where),
            )


def _check_dependencies(state: ReplayState, rule: NodeRule, event: Fields, where: int) -> None:
    decl = rule.decl
    predecessors = event["predecessors"]
    if not predecessors:
        raise error(
            ErrorCode.JOURNAL_DEPENDENCY_GAP,
            f"{event['node']}#{event['activation']} names no predecessor",
            path=at(where),
        )
    seen: set[Key] = set()
    for ref in predecessors:
        node = ref["node"]
        _known_node(state, node, where)
        pred = (node, ref["activation"])
        if pred in seen or node not in rule.upstream:
            raise error(
                ErrorCode.JOURNAL_DEPENDENCY_GAP,
                f"{node}#{pred[1]} is repeated or not upstream of {event['node']}",
                path=at(where),
                expected=", ".join(decl.upstream),
            )
        seen.add(pred)
        if node in rule.failure_upstream and state.is_current_failure(pred):
            continue
        if not state.is_current_completion(pred):
            raise error(
                ErrorCode.JOURNAL_DEPENDENCY_GAP,
                f"{node}#{pred[1]} is {state.state_of(pred).value}, not a current completion",
                path=at(where),
                expected="completed",
            )


def _check_outputs(rule: NodeRule, event: Fields, where: int) -> None:
    refs = event["refs"]
    if rule.outputs:
        given = {(ref["kind"], ref["id"]) for ref in refs}
        if not rule.outputs <= given:
            # Name the first missing artifact in declaration order.
            for artifact in rule.decl.artifacts:
                if (artifact.kind, artifact.id) not in given:
                    raise error(
                        ErrorCode.JOURNAL_MISSING_OUTPUT,
                        f"completion does not reference {artifact.kind}/{artifact.id}",
                        path=at(where),
                    )
    if rule.needs_conduct and not any(ref["kind"] == CONDUCT_KIND for ref in refs):
        raise error(
            ErrorCode.JOURNAL_MISSING_OUTPUT,
            f"a {rule.decl.task.value} completion must reference its conduct record",
            path=at(where),
            expected=f"a {CONDUCT_KIND} reference",
        )


def _check_actor(
    state: ReplayState, rule: NodeRule, event: Fields, transition: Transition, where: int
) -> None:
    actor = event["actor"]
    role = actor["role"]
    kind = actor["kind"]
    if role is not None:
        if kind == _AUTOMATION:
            raise error(
                ErrorCode.JOURNAL_AUTOMATION_CLAIMS_HUMAN,
                f"automation {actor['id']!r} claims role {role!r}",
                path=at(where),
            )
        if role not in state.policy.roles_of(actor["id"]):
            raise error(
                ErrorCode.JOURNAL_FORGED_ROLE,
                f"the authority policy does not give {actor['id']!r} role {role!r}",
                path=at(where),
            )
    if transition not in rule.human_steps:
        return
    decl = rule.decl
    if kind == _AUTOMATION:
        raise error(
            ErrorCode.JOURNAL_AUTOMATION_CLAIMS_HUMAN,
            f"automation {actor['id']!r} cannot perform a {decl.task.value} step",
            path=at(where),
        )
    if role is None:
        raise error(
            ErrorCode.JOURNAL_ACTOR_REQUIRED,
            f"a {decl.task.value} step needs an actor acting under a role",
            path=at(where),
            expected=", ".join(decl.roles),
        )
    if role not in rule.roles:
        raise error(
            ErrorCode.JOURNAL_FORGED_ROLE,
            f"node {decl.id!r} does not admit role {role!r}",
            path=at(where),
            expected=", ".join(decl.roles),
        )


def _check_approvals(state: ReplayState, decl: NodeDecl, event: Fields, where: int) -> None:
    need = decl.approval
    approvals = event["approvals"]
    if need is None:
        if approvals:
            raise error(
                ErrorCode.JOURNAL_APPROVAL_INVALID,
                f"node {decl.id!r} takes no approvals",
                path=at(where),
            )
        return
    for approval in approvals:
        actor, role = approval["actor"], approval["role"]
        if approval["kind"] != _HUMAN:
            raise error(
                ErrorCode.JOURNAL_AUTOMATION_CLAIMS_HUMAN,
                f"automation {actor!r} cannot approve",
                path=at(where),
            )
        if role not in need.roles:
            raise error(
                ErrorCode.JOURNAL_APPROVAL_INVALID,
                f"role {role!r} cannot approve {decl.id!r}",
                path=at(where),
                expected=", ".join(need.roles),
            )
        if role not in state.policy.roles_of(actor):
            raise error(
                ErrorCode.JOURNAL_FORGED_ROLE,
                f"the authority policy does not give {actor!r} role {role!r}",
                path=at(where),
            )
    actors = [approval["actor"] for approval in approvals]
    if need.distinct_actors and len(set(actors)) != len(actors):
        raise error(
            ErrorCode.JOURNAL_APPROVAL_INVALID,
            "one actor approved more than once",
            path=at(where),
        )
    if len(actors) < need.min_count:
        raise error(
            ErrorCode.JOURNAL_APPROVAL_INVALID,
            f"{len(actors)} approval(s) given",
            path=at(where),
            expected=f"at least {need.min_count}",
        )


def _check_batch(
    state: ReplayState, event: Fields, transition: Transition, key: Key, where: int
) -> None:
    open_batch = state.batch
    batch = event["batch"]
    if open_batch is not None:
        if (
            batch is None
            or event["request"] != open_batch.request
            or transition is not open_batch.transition
            or batch["size"] != open_batch.size
            or batch["index"] != len(open_batch.keys) + 1
            or key in open_batch.keys
        ):
            raise error(
                ErrorCode.JOURNAL_PARTIAL_INVALIDATION
                if open_batch.transition is _WORK_INVALIDATED
                else ErrorCode.JOURNAL_BAD_SUCCESSOR,
                f"batch {open_batch.request!r} is cut short or out of order",
                path=at(where),
                expected=f"event {len(open_batch.keys) + 1} of {open_batch.size}",
            )
        return
    if batch is not None and batch["index"] != 1:
        partial = (
            ErrorCode.JOURNAL_BAD_SUCCESSOR
            if transition is _SUCCESSOR_BOUND
            else ErrorCode.JOURNAL_PARTIAL_INVALIDATION
        )
        raise error(partial, "a batch must start at index 1", path=at(where))
    known = state.requests.get(event["request"])
    if known is not None:
        code = (
            ErrorCode.JOURNAL_DUPLICATE_EVENT
            if known[0] == event["request_digest"]
            else ErrorCode.JOURNAL_REQUEST_CONFLICT
        )
        raise error(
            code,
            f"request {event['request']!r} was already recorded at ordinal {known[1]}",
            path=at(where),
        )
