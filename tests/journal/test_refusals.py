"""Every refusal of the append rules, each with its exact code."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from contracts import AuthorityPolicy, ErrorCode, ExecsysError, NodeId
from contracts._journal import (
    ActivationRef,
    Actor,
    ActorKind,
    Approval,
    ArtifactDecl,
    AttemptRef,
    Batch,
    NodeState,
    SuccessorInfo,
    Transition,
)
from host.journal import InvalidateCommand, Journal, ordinal_of, replay_lines, verify_lines

from .make_fixtures import _invalidated, _rechain
from .scenario import (
    ALICE,
    APPROVALS,
    HUMAN_REVIEWER,
    NODES,
    POLICY,
    RUNNER,
    SHIPPER,
    Driver,
    default_refs,
    header,
    ref,
    run_round,
)


def refused(code: ErrorCode, action: Callable[[], object]) -> ExecsysError:
    with pytest.raises(ExecsysError) as caught:
        action()
    assert caught.value.code is code, caught.value.one_line()
    return caught.value


def reviewed() -> Driver:
    """plan/build/lint done and review#1 ready."""
    d = Driver()
    d.start("plan")
    d.complete("plan")
    for node in ("build", "lint"):
        d.ready(node, 1, ("plan", 1))
        d.start(node)
        d.complete(node)
    d.ready("review", 1, ("build", 1), ("lint", 1))
    return d


# --- authority bound to the header ------------------------------------------------


def test_policy_other_than_the_header_binds_is_unverified() -> None:
    other = AuthorityPolicy(actors={"mallory": ("maintainer",)}, approver="mallory")
    refused(ErrorCode.JOURNAL_UNVERIFIED_AUTHORITY, lambda: Journal.create(header(), other))


def test_policy_without_approver_is_unverified() -> None:
    unapproved = AuthorityPolicy(actors=POLICY.actors)
    refused(
        ErrorCode.JOURNAL_UNVERIFIED_AUTHORITY,
        lambda: Journal.create(header(policy=unapproved), unapproved),
    )


# --- concurrency and idempotency ------------------------------------------------------


def test_stale_writer_is_refused_not_rebased() -> None:
    d = Driver()
    stale = d.command(
        "plan", Transition.WORK_STARTED, NodeState.READY, attempt=AttemptRef(id="a", sequence=1)
    )
    d.start("plan", attempt=AttemptRef(id="b", sequence=1))
    error = refused(ErrorCode.JOURNAL_STALE_HEAD, lambda: d.journal.append(stale))
    assert error.expected == d.journal.head
    assert len(d.journal) == 1


def test_same_request_returns_the_same_event_and_appends_nothing() -> None:
    d = Driver()
    command = d.command(
        "plan", Transition.WORK_STARTED, NodeState.READY, attempt=AttemptRef(id="a", sequence=1)
    )
    first = d.journal.append(command)
    head = d.journal.head
    again = d.journal.append(command.model_copy(update={"at": command.at.replace(year=2030)}))
    assert again == first
    assert (len(d.journal), d.journal.head) == (1, head)


def test_same_request_id_with_other_content_conflicts() -> None:
    d = Driver()
    command = d.command(
        "plan", Transition.WORK_STARTED, NodeState.READY, attempt=AttemptRef(id="a", sequence=1)
    )
    d.journal.append(command)
    other = command.model_copy(update={"rationale": "different"})
    error = refused(ErrorCode.JOURNAL_REQUEST_CONFLICT, lambda: d.journal.append(other))
    assert ordinal_of(error) == 1


# --- nodes, states, transitions ---------------------------------------------------------


def test_unknown_node() -> None:
    d = Driver()
    refused(ErrorCode.JOURNAL_UNKNOWN_NODE, lambda: d.start("nowhere"))


def test_prior_state_mismatch() -> None:
    d = Driver()
    refused(
        ErrorCode.JOURNAL_PRIOR_STATE_MISMATCH,
        lambda: d.do(
            "plan",
            Transition.WORK_COMPLETED,
            NodeState.ACTIVE,
            attempt=AttemptRef(id="a", sequence=1),
        ),
    )


def test_transition_outside_the_table() -> None:
    d = Driver()
    refused(
        ErrorCode.JOURNAL_INVALID_TRANSITION,
        lambda: d.do(
            "plan",
            Transition.BLOCK_CLEARED,
            NodeState.READY,
            attempt=AttemptRef(id="a", sequence=1),
        ),
    )


def test_batch_transitions_are_not_plain_appends() -> None:
    d = Driver()
    refused(
        ErrorCode.JOURNAL_INVALID_TRANSITION,
        lambda: d.do("plan", Transition.WORK_INVALIDATED, NodeState.READY),
    )


def test_skipped_activation_is_refused() -> None:
    d = Driver()
    d.start("plan")
    d.complete("plan")
    refused(ErrorCode.JOURNAL_ACTIVATION_INVALID, lambda: d.ready("build", 2, ("plan", 1)))


def test_second_live_activation_is_refused() -> None:
    d = Driver()
    d.start("plan")  # plan#1 is active: a loop cannot open plan#2 beside it
    refused(ErrorCode.JOURNAL_ACTIVATION_INVALID, lambda: d.ready("plan", 2, ("review", 1)))


# --- dependencies -----------------------------------------------------------------------


def test_dependency_not_completed() -> None:
    d = Driver()
    error = refused(ErrorCode.JOURNAL_DEPENDENCY_GAP, lambda: d.ready("build", 1, ("plan", 1)))
    assert ordinal_of(error) == 1


def test_dependency_not_upstream() -> None:
    d = reviewed()
    refused(ErrorCode.JOURNAL_DEPENDENCY_GAP, lambda: d.ready("ship", 1, ("build", 1)))


def test_dependency_missing_predecessors() -> None:
    d = reviewed()
    refused(ErrorCode.JOURNAL_DEPENDENCY_GAP, lambda: d.ready("ship", 1))


def test_dependency_on_a_superseded_activation() -> None:
    d = Driver()
    run_round(d, 1)
    run_round(d, 2, (("review", 1),))
    # review#1 is completed but review#2 is newer: review#1 is no longer current.
    refused(ErrorCode.JOURNAL_DEPENDENCY_GAP, lambda: d.ready("ship", 1, ("review", 1)))


def test_dependency_on_an_invalidated_activation() -> None:
    d = Driver()
    d.start("plan")
    d.complete("plan")
    d.invalidate(("plan", 1))
    refused(ErrorCode.JOURNAL_DEPENDENCY_GAP, lambda: d.ready("build", 1, ("plan", 1)))


def test_predecessors_only_on_dependencies_satisfied() -> None:
    d = Driver()
    refused(
        ErrorCode.JOURNAL_DEPENDENCY_GAP,
        lambda: d.start("plan", predecessors=(ActivationRef(node=NodeId("review"), activation=1),)),
    )


# --- attempts and retries ------------------------------------------------------------------


def test_attempt_sequence_must_be_contiguous() -> None:
    d = Driver()
    refused(ErrorCode.JOURNAL_ATTEMPT_INVALID, lambda: d.start("plan", seq=2))


def test_completion_must_name_the_open_attempt() -> None:
    d = Driver()
    d.start("plan")
    refused(
        ErrorCode.JOURNAL_ATTEMPT_INVALID,
        lambda: d.complete("plan", attempt=AttemptRef(id="other", sequence=1)),
    )


def test_work_start_without_attempt() -> None:
    d = Driver()
    refused(ErrorCode.JOURNAL_ATTEMPT_INVALID, lambda: d.start("plan", attempt=None))


def test_retry_reuses_no_attempt_id() -> None:
    d = Driver()
    d.start("plan")
    d.fail("plan")
    d.retry("plan")
    refused(
        ErrorCode.JOURNAL_ATTEMPT_INVALID,
        lambda: d.start("plan", seq=2, attempt=AttemptRef(id="plan-1-1", sequence=2)),
    )


def test_retry_without_authorization() -> None:
    d = Driver()
    d.start("plan")
    d.fail("plan")
    refused(ErrorCode.JOURNAL_RETRY_UNAUTHORIZED, lambda: d.retry("plan", authorization=None))


def test_retry_keeps_the_failure_in_history() -> None:
    d = Driver()
    d.start("plan")
    d.fail("plan")
    d.retry("plan")
    d.start("plan", seq=2)
    d.complete("plan", seq=2)
    attempts = d.journal.projection().activations[(NodeId("plan"), 1)].attempts
    assert [(a.sequence, a.outcome) for a in attempts] == [
        (1, NodeState.FAILED),
        (2, NodeState.COMPLETED),
    ]


# --- outputs -------------------------------------------------------------------------------


def test_completion_missing_a_declared_output() -> None:
    d = Driver()
    d.start("plan")
    refused(
        ErrorCode.JOURNAL_MISSING_OUTPUT, lambda: d.complete("plan", refs=(ref("port", "other"),))
    )


TWO_ARTIFACTS = tuple(
    decl.model_copy(
        update={
            "artifacts": (
                ArtifactDecl(kind="port", id="plan"),
                ArtifactDecl(kind="file", id="notes"),
            )
        }
    )
    if decl.id == "plan"
    else decl
    for decl in NODES
)


@pytest.mark.parametrize(
    ("given", "missing"),
    [((("port", "plan"),), "file/notes"), ((("file", "notes"),), "port/plan"), ((), "port/plan")],
)
def test_completion_must_reference_every_declared_artifact(
    given: tuple[tuple[str, str], ...], missing: str
) -> None:
    d = Driver(Journal.create(header().model_copy(update={"nodes": TWO_ARTIFACTS}), POLICY))
    d.start("plan")
    size = len(d.journal)
    caught = refused(
        ErrorCode.JOURNAL_MISSING_OUTPUT,
        lambda: d.complete("plan", refs=tuple(ref(kind, ident) for kind, ident in given)),
    )
    assert missing in caught.message
    assert len(d.journal) == size
    d.complete("plan", refs=(ref("file", "notes"), ref("port", "plan")))
    assert d.journal.projection().state(NodeId("plan")) is NodeState.COMPLETED


def test_human_completion_must_bind_its_conduct_record() -> None:
    d = reviewed()
    d.start("review", actor=HUMAN_REVIEWER)
    refused(
        ErrorCode.JOURNAL_MISSING_OUTPUT,
        lambda: d.complete("review", actor=HUMAN_REVIEWER, approvals=APPROVALS, refs=()),
    )


# --- people and roles -----------------------------------------------------------------------


def test_human_step_needs_a_role() -> None:
    d = reviewed()
    refused(
        ErrorCode.JOURNAL_ACTOR_REQUIRED,
        lambda: d.start("review", actor=Actor(id="carol", kind=ActorKind.HUMAN)),
    )


def test_role_not_in_policy_is_forged() -> None:
    d = reviewed()
    refused(
        ErrorCode.JOURNAL_FORGED_ROLE,
        lambda: d.start("review", actor=Actor(id="bob", kind=ActorKind.HUMAN, role="reviewer")),
    )


def test_role_not_admitted_by_the_node_is_forged() -> None:
    d = reviewed()
    refused(
        ErrorCode.JOURNAL_FORGED_ROLE,
        lambda: d.start("review", actor=Actor(id="alice", kind=ActorKind.HUMAN, role="maintainer")),
    )


def test_automation_on_a_human_step() -> None:
    d = reviewed()
    refused(ErrorCode.JOURNAL_AUTOMATION_CLAIMS_HUMAN, lambda: d.start("review", actor=RUNNER))


def test_automation_carrying_a_role() -> None:
    d = Driver()
    robot = Actor(id="alice", kind=ActorKind.AUTOMATION, role="maintainer")
    refused(ErrorCode.JOURNAL_AUTOMATION_CLAIMS_HUMAN, lambda: d.start("plan", actor=robot))


def test_hybrid_completion_needs_a_human() -> None:
    d = Driver()
    run_round(d, 1)
    d.ready("ship", 1, ("review", 1))
    d.start("ship")  # automation may start hybrid work
    refused(ErrorCode.JOURNAL_AUTOMATION_CLAIMS_HUMAN, lambda: d.complete("ship"))
    d.complete("ship", actor=SHIPPER)


# --- approvals --------------------------------------------------------------------------------


def approval(actor: str, role: str = "maintainer", kind: ActorKind = ActorKind.HUMAN) -> Approval:
    return Approval(actor=actor, kind=kind, role=role, record=ref("approval", actor))


@pytest.mark.parametrize(
    ("approvals", "code"),
    [
        ((approval("alice"),), ErrorCode.JOURNAL_APPROVAL_INVALID),
        ((approval("alice"), approval("alice")), ErrorCode.JOURNAL_APPROVAL_INVALID),
        ((approval("alice"), approval("carol", "reviewer")), ErrorCode.JOURNAL_APPROVAL_INVALID),
        ((approval("alice"), approval("carol")), ErrorCode.JOURNAL_FORGED_ROLE),
        (
            (approval("alice"), approval("bob", kind=ActorKind.AUTOMATION)),
            ErrorCode.JOURNAL_AUTOMATION_CLAIMS_HUMAN,
        ),
    ],
    ids=["too-few", "same-actor", "role-not-approving", "role-not-in-policy", "automation"],
)
def test_approvals(approvals: tuple[Approval, ...], code: ErrorCode) -> None:
    d = reviewed()
    d.start("review", actor=HUMAN_REVIEWER)
    refused(code, lambda: d.complete("review", actor=HUMAN_REVIEWER, approvals=approvals))
    d.complete("review", actor=HUMAN_REVIEWER, approvals=APPROVALS)


def test_approvals_on_a_node_that_takes_none() -> None:
    d = Driver()
    d.start("plan")
    refused(ErrorCode.JOURNAL_APPROVAL_INVALID, lambda: d.complete("plan", approvals=APPROVALS))


# --- invalidation and successors -------------------------------------------------------------


def test_invalidation_covers_the_whole_closure_in_order() -> None:
    d = reviewed()
    batch = d.invalidate(("build", 1))
    assert [(e.node, e.activation) for e in batch] == [("build", 1), ("review", 1)]
    assert [(e.batch.index, e.batch.size) for e in batch if e.batch] == [(1, 2), (2, 2)]
    projection = d.journal.projection()
    assert projection.state(NodeId("lint")) is NodeState.COMPLETED
    assert projection.state(NodeId("review")) is NodeState.INVALIDATED


def test_partial_affected_set_is_refused() -> None:
    d = reviewed()
    size = len(d.journal)
    partial = (ActivationRef(node=NodeId("build"), activation=1),)
    refused(
        ErrorCode.JOURNAL_PARTIAL_INVALIDATION, lambda: d.invalidate(("build", 1), affected=partial)
    )
    assert len(d.journal) == size


@pytest.mark.parametrize("indexes", [(1, 1, 3), (1, 3, 2), (1, 2, 2), (2, 1, 3)])
def test_replay_refuses_an_invalidation_batch_out_of_order(indexes: tuple[int, int, int]) -> None:
    journal = _invalidated()
    events = list(journal.events)
    batch = [i for i, e in enumerate(events) if e.transition is Transition.WORK_INVALIDATED]
    assert len(batch) == 3
    for position, index in zip(batch, indexes, strict=True):
        events[position] = events[position].model_copy(update={"batch": Batch(index=index, size=3)})
    lines = _rechain(journal, events)
    assert verify_lines(lines).ok, "the chain is intact: only the append rules can see this"
    with pytest.raises(ExecsysError) as caught:
        replay_lines(lines, POLICY)
    assert caught.value.code is ErrorCode.JOURNAL_PARTIAL_INVALIDATION
    first_wrong = next(k for k, index in enumerate(indexes) if index != k + 1)
    assert ordinal_of(caught.value) == events[batch[first_wrong]].ordinal


@pytest.mark.parametrize(
    ("position", "wrong"),
    [(0, NodeState.COMPLETED), (1, NodeState.ACTIVE), (2, NodeState.FAILED)],
)
def test_replay_refuses_a_result_state_the_table_does_not_give(
    position: int, wrong: NodeState
) -> None:
    # Appending computes the result state itself; only a stored journal can state
    # another one, so the rule is pinned on replay of an edited, re-chained copy.
    journal = _invalidated()
    events = list(journal.events)
    assert events[position].result_state is not wrong
    events[position] = events[position].model_copy(update={"result_state": wrong})
    lines = _rechain(journal, events)
    assert verify_lines(lines).ok
    with pytest.raises(ExecsysError) as caught:
        replay_lines(lines, POLICY)
    assert caught.value.code is ErrorCode.JOURNAL_INVALID_TRANSITION
    assert ordinal_of(caught.value) == position + 1


def test_replay_accepts_the_invalidation_batch_in_order() -> None:
    journal = _invalidated()
    lines = _rechain(journal, list(journal.events))
    assert replay_lines(lines, POLICY).head == journal.head


def test_unresolvable_invalidation_source() -> None:
    d = reviewed()
    refused(
        ErrorCode.JOURNAL_INVALIDATION_SOURCE,
        lambda: d.invalidate(("build", 1), resolver=lambda _: False),
    )


def test_invalidating_twice_is_not_in_the_table() -> None:
    d = reviewed()
    d.invalidate(("build", 1))
    refused(ErrorCode.JOURNAL_INVALID_TRANSITION, lambda: d.invalidate(("build", 1)))


def test_repeated_invalidation_request_returns_the_same_batch() -> None:
    d = reviewed()
    first = d.invalidate(("build", 1))
    head = d.journal.head
    repeat = InvalidateCommand(
        request=first[0].request,
        expected_head=first[0].prior,
        actor=ALICE,
        at=datetime(2031, 1, 1, tzinfo=UTC),  # time is not request content
        targets=(ActivationRef(node=NodeId("build"), activation=1),),
        source=ref("finding", "f-1"),
        policy="invalidate-descendants",
    )
    assert d.journal.invalidate(repeat, lambda _: True) == first
    assert d.journal.head == head


def test_successor_needs_invalidated_predecessors() -> None:
    d = reviewed()
    refused(ErrorCode.JOURNAL_BAD_SUCCESSOR, lambda: d.bind(("build", 1)))


def test_successor_cannot_be_the_execution_itself() -> None:
    d = reviewed()
    d.invalidate(("build", 1))
    self_successor = SuccessorInfo(execution="d-journal-test", header=ref("header", "x").digest)
    refused(ErrorCode.JOURNAL_BAD_SUCCESSOR, lambda: d.bind(("build", 1), successor=self_successor))


def test_successor_supersedes() -> None:
    d = reviewed()
    d.invalidate(("build", 1))
    d.bind(("build", 1), ("review", 1))
    projection = d.journal.projection()
    assert projection.state(NodeId("build")) is NodeState.SUPERSEDED
    assert projection.state(NodeId("review")) is NodeState.SUPERSEDED
    refused(ErrorCode.JOURNAL_BAD_SUCCESSOR, lambda: d.bind(("build", 1)))


def test_refusals_name_the_next_ordinal() -> None:
    d = reviewed()
    error = refused(ErrorCode.JOURNAL_UNKNOWN_NODE, lambda: d.start("nowhere"))
    assert ordinal_of(error) == len(d.journal) + 1
    assert default_refs("plan", 1)
