"""The state table, and a state machine proving the journal admits exactly its pairs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from contracts import ErrorCode, ExecsysError, NodeId
from contracts._journal import TRANSITIONS, ActivationRef, AttemptRef, NodeState, Transition
from host.journal import export_lines, replay_lines, verify_lines

from .scenario import POLICY, Driver, default_refs, ref

S, T = NodeState, Transition
NON_TERMINAL = [S.PENDING, S.READY, S.ACTIVE, S.BLOCKED, S.COMPLETED, S.FAILED]
#: The table as the design states it, written out independently of the implementation.
EXPECTED = {
    (S.PENDING, T.DEPENDENCIES_SATISFIED): S.READY,
    (S.READY, T.WORK_STARTED): S.ACTIVE,
    (S.ACTIVE, T.WORK_BLOCKED): S.BLOCKED,
    (S.BLOCKED, T.BLOCK_CLEARED): S.ACTIVE,
    (S.ACTIVE, T.WORK_COMPLETED): S.COMPLETED,
    (S.ACTIVE, T.WORK_FAILED): S.FAILED,
    (S.FAILED, T.RETRY_AUTHORIZED): S.READY,
    (S.INVALIDATED, T.SUCCESSOR_BOUND): S.SUPERSEDED,
} | {(state, T.WORK_INVALIDATED): S.INVALIDATED for state in NON_TERMINAL}


def test_table_is_exactly_the_design() -> None:
    assert dict(TRANSITIONS) == EXPECTED


def test_terminal_states_never_resume() -> None:
    assert not [pair for pair in TRANSITIONS if pair[0] is S.SUPERSEDED]
    assert [pair for pair in TRANSITIONS if pair[0] is S.INVALIDATED] == [
        (S.INVALIDATED, T.SUCCESSOR_BOUND)
    ]


class NodeStates(RuleBasedStateMachine):
    """Drive build#1 with arbitrary transitions; only table pairs may be admitted."""

    def __init__(self) -> None:
        super().__init__()
        self.d = Driver()
        self.state = S.PENDING
        self.attempts = 0

    @initialize()
    def plan_done(self) -> None:
        self.d.start("plan")
        self.d.complete("plan")

    def _attempt(self, transition: Transition) -> AttemptRef | None:
        if transition is T.WORK_STARTED:
            return AttemptRef(id=f"a{self.attempts + 1}", sequence=self.attempts + 1)
        if transition in (T.WORK_BLOCKED, T.BLOCK_CLEARED, T.WORK_COMPLETED, T.WORK_FAILED):
            return AttemptRef(id=f"a{max(self.attempts, 1)}", sequence=max(self.attempts, 1))
        return None

    def _send(self, transition: Transition) -> None:
        # Every payload is valid for its transition, so only the table can refuse.
        if transition is T.WORK_INVALIDATED:
            self.d.invalidate(("build", 1))
            return
        if transition is T.SUCCESSOR_BOUND:
            self.d.bind(("build", 1))
            return
        extra: dict[str, Any] = {"attempt": self._attempt(transition)}
        if transition is T.DEPENDENCIES_SATISFIED:
            extra["predecessors"] = (ActivationRef(node=NodeId("plan"), activation=1),)
        elif transition is T.RETRY_AUTHORIZED:
            extra["authorization"] = ref("authorization", f"retry-{len(self.d.journal)}")
        elif transition is T.WORK_COMPLETED:
            extra["refs"] = default_refs("build", 1)
        self.d.do("build", transition, self.state, **extra)

    @rule(transition=st.sampled_from(Transition))
    def attempt(self, transition: Transition) -> None:
        size = len(self.d.journal)
        if (self.state, transition) not in EXPECTED:
            with pytest.raises(ExecsysError) as caught:
                self._send(transition)
            assert caught.value.code in {
                ErrorCode.JOURNAL_INVALID_TRANSITION,
                ErrorCode.JOURNAL_BAD_SUCCESSOR,
            }, caught.value.one_line()
            assert len(self.d.journal) == size
            return
        self._send(transition)
        self.state = EXPECTED[(self.state, transition)]
        if transition is T.WORK_STARTED:
            self.attempts += 1

    @rule(state=st.sampled_from(NodeState))
    def wrong_expectation(self, state: NodeState) -> None:
        if state is self.state:
            return
        with pytest.raises(ExecsysError) as caught:
            self.d.do("build", T.WORK_STARTED, state, attempt=self._attempt(T.WORK_STARTED))
        assert caught.value.code is ErrorCode.JOURNAL_PRIOR_STATE_MISMATCH

    @invariant()
    def projection_matches(self) -> None:
        assert self.d.journal.projection().state(NodeId("build"), 1) is self.state

    def teardown(self) -> None:
        lines = list(export_lines(self.d.journal))
        assert verify_lines(lines).ok
        replayed = replay_lines(lines, POLICY)
        assert replayed.head == self.d.journal.head
        assert replayed.projection() == self.d.journal.projection()


NodeStates.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
TestNodeStates = NodeStates.TestCase
