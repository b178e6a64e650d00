"""The append rules: whether one event may follow the journal's current state.

:func:`check_event` is called for every event, both when it is appended and
when a stored journal is replayed; it never mutates the state. Checks run in a
fixed order so one bad event always yields the same code: node and activation,
prior state, transition table, payload shape, transition-specific rules
(dependencies, attempts, outputs, invalidation, successor), authority,
approvals, then batch and request bookkeeping.
"""

from __future__ import annotations

from contracts._errors import ErrorCode, error
from contracts._journal import (
    ActorKind,
    JournalEvent,
    NodeDecl,
    Transition,
    next_state,
)
from host.journal._codec import at
from host.journal._state import HUMAN_STEPS, LIVE_STATES, Key, NodeRule, ReplayState

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
_AUTOMATION = ActorKind.AUTOMATION
_HUMAN = ActorKind.HUMAN
#: The record kind a human or hybrid completion must reference (its conduct record).
CONDUCT_KIND = "conduct"


def check_event(state: ReplayState, event: JournalEvent) -> None:
    """Raise the first rule ``event`` breaks against ``state``; return if it is admitted."""
    where = at(event.ordinal)
    rule = _known_node(state, event.node, where)
    key = (event.node, event.activation)
    _check_activation(state, key, where)
    current = state.state_of(key)
    if event.prior_state is not current:
        raise error(
            ErrorCode.JOURNAL_PRIOR_STATE_MISMATCH,
            f"{event.node}#{event.activation} is {current.value}",
            path=where,
            expected=event.prior_state.value,
        )
    result = next_state(current, event.transition)
    if result is None:
        code = (
            ErrorCode.JOURNAL_BAD_SUCCESSOR
            if event.transition is _SUCCESSOR_BOUND
            else ErrorCode.JOURNAL_INVALID_TRANSITION
        )
        raise error(
            code, f"{event.transition.value} is not admitted from {current.value}", path=where
        )
    if event.result_state is not result:
        raise error(
            ErrorCode.JOURNAL_INVALID_TRANSITION,
            f"{event.transition.value} from {current.value} leads to {result.value}",
            path=where,
            expected=result.value,
        )
    _check_payload(event, where)
    _check_transition(state, rule, event, key, where)
    _check_actor(state, rule, event, where)
    if event.transition is _WORK_COMPLETED:
        _check_approvals(state, rule.decl, event, where)
    _check_batch(state, event, key, where)


def _known_node(state: ReplayState, node: str, where: str) -> NodeRule:
    rule = state.rules.get(node)
    if rule is None:
        raise error(ErrorCode.JOURNAL_UNKNOWN_NODE, f"node {node!r} is not declared", path=where)
    return rule


def _check_activation(state: ReplayState, key: Key, where: str) -> None:
    if key in state.activations:
        return
    node, number = key
    latest = state.latest.get(node, 0)
    if number != latest + 1:
        raise error(
            ErrorCode.JOURNAL_ACTIVATION_INVALID,
            f"{node} has no activation {number}",
            path=where,
            expected=f"an existing activation or {latest + 1}",
        )
    if latest and state.activations[(node, latest)].state in LIVE_STATES:
        raise error(
            ErrorCode.JOURNAL_ACTIVATION_INVALID,
            f"{node}#{latest} is still {state.activations[(node, latest)].state.value}",
            path=where,
        )


def _check_payload(event: JournalEvent, where: str) -> None:
    """Each optional member belongs to particular transitions only."""
    transition = event.transition
    attempt_step = transition in _ATTEMPT_STEPS
    if (event.attempt is not None) != attempt_step:
        raise error(
            ErrorCode.JOURNAL_ATTEMPT_INVALID,
            f"{transition.value} "
            + ("must bind an attempt" if attempt_step else "binds no attempt"),
            path=where,
        )
    if (event.authorization is not None) != (transition is _RETRY_AUTHORIZED):
        raise error(
            ErrorCode.JOURNAL_RETRY_UNAUTHORIZED,
            "a retry needs an explicit authorization and only a retry carries one",
            path=where,
        )
    if event.predecessors and transition is not _DEPENDENCIES_SATISFIED:
        raise error(
            ErrorCode.JOURNAL_DEPENDENCY_GAP,
            "only dependencies-satisfied names predecessors",
            path=where,
        )
    if event.approvals and transition is not _WORK_COMPLETED:
        raise error(
            ErrorCode.JOURNAL_APPROVAL_INVALID, "only a completion carries approvals", path=where
        )
    batch_step = transition in _BATCH_STEPS
    if (event.batch is not None) != batch_step:
        raise error(
            ErrorCode.JOURNAL_INVALID_TRANSITION,
            f"{transition.value} is "
            + ("only recorded in a batch" if batch_step else "never batched"),
            path=where,
        )
    if (event.invalidation is not None) != (transition is _WORK_INVALIDATED):
        raise error(
            ErrorCode.JOURNAL_INVALIDATION_SOURCE,
            "invalidation data belongs to work-invalidated and is required there",
            path=where,
        )
    if (event.successor is not None) != (transition is _SUCCESSOR_BOUND):
        raise error(
            ErrorCode.JOURNAL_BAD_SUCCESSOR,
            "successor data belongs to successor-bound and is required there",
            path=where,
        )


def _check_transition(
    state: ReplayState, rule: NodeRule, event: JournalEvent, key: Key, where: str
) -> None:
    transition = event.transition
    record = state.activations.get(key)
    if transition is _DEPENDENCIES_SATISFIED:
        _check_dependencies(state, rule, event, where)
    elif transition is _WORK_STARTED:
        assert event.attempt is not None  # guaranteed by _check_payload
        attempts = record.attempts if record is not None else []
        if event.attempt.sequence != len(attempts) + 1 or any(
            old.id == event.attempt.id for old in attempts
        ):
            raise error(
                ErrorCode.JOURNAL_ATTEMPT_INVALID,
                f"attempt {event.attempt.id!r} #{event.attempt.sequence} does not continue "
                f"{len(attempts)} earlier attempt(s) with a fresh id",
                path=where,
                expected=f"sequence {len(attempts) + 1}",
            )
    elif transition in _ATTEMPT_STEPS:
        assert event.attempt is not None
        current = record.open_attempt() if record is not None else None
        if current is None or (current.id, current.sequence) != (
            event.attempt.id,
            event.attempt.sequence,
        ):
            raise error(
                ErrorCode.JOURNAL_ATTEMPT_INVALID,
                f"attempt {event.attempt.id!r} #{event.attempt.sequence} is not the open attempt",
                path=where,
                expected=f"{current.id} #{current.sequence}" if current else "",
            )
        if transition is _WORK_COMPLETED:
            _check_outputs(rule, event, where)
    elif transition is _WORK_INVALIDATED:
        assert event.invalidation is not None
        source = event.invalidation.source
        if state.resolver is not None and not state.resolver(source):
            raise error(
                ErrorCode.JOURNAL_INVALIDATION_SOURCE,
                f"source {source.kind}/{source.id} does not resolve",
                path=where,
            )
    elif transition is _SUCCESSOR_BOUND:
        assert event.successor is not None
        if event.successor.execution == state.header.execution:
            raise error(
                ErrorCode.JOURNAL_BAD_SUCCESSOR,
                "an execution cannot succeed itself",
                path=where,
            )


def _check_dependencies(
    state: ReplayState, rule: NodeRule, event: JournalEvent, where: str
) -> None:
    decl = rule.decl
    if not event.predecessors:
        raise error(
            ErrorCode.JOURNAL_DEPENDENCY_GAP,
            f"{event.node}#{event.activation} names no predecessor",
            path=where,
        )
    seen: set[Key] = set()
    for ref in event.predecessors:
        _known_node(state, ref.node, where)
        pred = (ref.node, ref.activation)
        if pred in seen or ref.node not in rule.upstream:
            raise error(
                ErrorCode.JOURNAL_DEPENDENCY_GAP,
                f"{ref.node}#{ref.activation} is repeated or not upstream of {event.node}",
                path=where,
                expected=", ".join(decl.upstream),
            )
        seen.add(pred)
        if ref.node in rule.failure_upstream and state.is_current_failure(pred):
            continue
        if not state.is_current_completion(pred):
            raise error(
                ErrorCode.JOURNAL_DEPENDENCY_GAP,
                f"{ref.node}#{ref.activation} is {state.state_of(pred).value}, "
                "not a current completion",
                path=where,
                expected="completed",
            )


def _check_outputs(rule: NodeRule, event: JournalEvent, where: str) -> None:
    refs = event.refs
    if rule.outputs:
        given = {(ref.kind, ref.id) for ref in refs}
        if not rule.outputs <= given:
            # Name the first missing artifact in declaration order.
            for artifact in rule.decl.artifacts:
                if (artifact.kind, artifact.id) not in given:
                    raise error(
                        ErrorCode.JOURNAL_MISSING_OUTPUT,
                        f"completion does not reference {artifact.kind}/{artifact.id}",
                        path=where,
                    )
    if rule.needs_conduct and not any(ref.kind == CONDUCT_KIND for ref in refs):
        raise error(
            ErrorCode.JOURNAL_MISSING_OUTPUT,
            f"a {rule.decl.task.value} completion must reference its conduct record",
            path=where,
            expected=f"a {CONDUCT_KIND} reference",
        )


def _check_actor(state: ReplayState, rule: NodeRule, event: JournalEvent, where: str) -> None:
    actor = event.actor
    role = actor.role
    if role is not None:
        if actor.kind is _AUTOMATION:
            raise error(
                ErrorCode.JOURNAL_AUTOMATION_CLAIMS_HUMAN,
                f"automation {actor.id!r} claims role {role!r}",
                path=where,
            )
        if role not in state.policy.roles_of(actor.id):
            raise error(
                ErrorCode.JOURNAL_FORGED_ROLE,
                f"the authority policy does not give {actor.id!r} role {role!r}",
                path=where,
            )
    if event.transition not in rule.human_steps:
        return
    decl = rule.decl
    if actor.kind is _AUTOMATION:
        raise error(
            ErrorCode.JOURNAL_AUTOMATION_CLAIMS_HUMAN,
            f"automation {actor.id!r} cannot perform a {decl.task.value} step",
            path=where,
        )
    if role is None:
        raise error(
            ErrorCode.JOURNAL_ACTOR_REQUIRED,
            f"a {decl.task.value} step needs an actor acting under a role",
            path=where,
            expected=", ".join(decl.roles),
        )
    if role not in rule.roles:
        raise error(
            ErrorCode.JOURNAL_FORGED_ROLE,
            f"node {decl.id!r} does not admit role {role!r}",
            path=where,
            expected=", ".join(decl.roles),
        )


def _check_approvals(state: ReplayState, decl: NodeDecl, event: JournalEvent, where: str) -> None:
    need = decl.approval
    if need is None:
        if event.approvals:
            raise error(
                ErrorCode.JOURNAL_APPROVAL_INVALID,
                f"node {decl.id!r} takes no approvals",
                path=where,
            )
        return
    for approval in event.approvals:
        if approval.kind is not _HUMAN:
            raise error(
                ErrorCode.JOURNAL_AUTOMATION_CLAIMS_HUMAN,
                f"automation {approval.actor!r} cannot approve",
                path=where,
            )
        if approval.role not in need.roles:
            raise error(
                ErrorCode.JOURNAL_APPROVAL_INVALID,
                f"role {approval.role!r} cannot approve {decl.id!r}",
                path=where,
                expected=", ".join(need.roles),
            )
        if approval.role not in state.policy.roles_of(approval.actor):
            raise error(
                ErrorCode.JOURNAL_FORGED_ROLE,
                f"the authority policy does not give {approval.actor!r} role {approval.role!r}",
                path=where,
            )
    actors = [approval.actor for approval in event.approvals]
    if need.distinct_actors and len(set(actors)) != len(actors):
        raise error(
            ErrorCode.JOURNAL_APPROVAL_INVALID, "one actor approved more than once", path=where
        )
    if len(actors) < need.min_count:
        raise error(
            ErrorCode.JOURNAL_APPROVAL_INVALID,
            f"{len(actors)} approval(s) given",
            path=where,
            expected=f"at least {need.min_count}",
        )


def _check_batch(state: ReplayState, event: JournalEvent, key: Key, where: str) -> None:
    open_batch = state.batch
    partial = (
        ErrorCode.JOURNAL_BAD_SUCCESSOR
        if event.transition is _SUCCESSOR_BOUND
        else ErrorCode.JOURNAL_PARTIAL_INVALIDATION
    )
    if open_batch is not None:
        batch = event.batch
        if (
            batch is None
            or event.request != open_batch.request
            or event.transition is not open_batch.transition
            or batch.size != open_batch.size
            or batch.index != len(open_batch.keys) + 1
            or key in open_batch.keys
        ):
            raise error(
                ErrorCode.JOURNAL_PARTIAL_INVALIDATION
                if open_batch.transition is _WORK_INVALIDATED
                else ErrorCode.JOURNAL_BAD_SUCCESSOR,
                f"batch {open_batch.request!r} is cut short or out of order",
                path=where,
                expected=f"event {len(open_batch.keys) + 1} of {open_batch.size}",
            )
        return
    if event.batch is not None and event.batch.index != 1:
        raise error(partial, "a batch must start at index 1", path=where)
    known = state.requests.get(event.request)
    if known is not None:
        code = (
            ErrorCode.JOURNAL_DUPLICATE_EVENT
            if known[0] == event.request_digest
            else ErrorCode.JOURNAL_REQUEST_CONFLICT
        )
        raise error(
            code,
            f"request {event.request!r} was already recorded at ordinal {known[1][0]}",
            path=where,
        )
