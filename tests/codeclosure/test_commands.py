"""Versioned goal commands, restart and cancellation (M1 proofs 3, 7 and 8)."""

from __future__ import annotations

import json
from typing import Any

from execution_system.codeclosure import GoalRuntime
from tests.codeclosure.helpers import (
    completed,
    create,
    decisions,
    execsys,
    refused,
    row,
    started,
)

QUESTION = "Keep the signature add(a, b)?"


def _waiting(runtime: GoalRuntime, sample: Any, aio: Any) -> dict[str, Any]:
    """A started goal whose worker asked a question (WAITING_FOR_INPUT at IMPLEMENT)."""
    created = create(runtime, sample, sample.worker("direct", ask=QUESTION))
    view = aio(runtime.start(created["goal"], 1))
    assert view["run_status"] == "WAITING_FOR_INPUT"
    assert view["phase"] == "IMPLEMENT"
    assert view["question"]["question"] == QUESTION
    return view


def _observed(runtime: GoalRuntime, goal: str) -> tuple[Any, ...]:
    listed = row(runtime, goal)
    view = runtime.view(goal)
    return (
        listed["version"],
        listed["state"],
        listed["delivery"],
        view["run_status"],
        view["phase"],
        view.get("delivery_status"),
        len(runtime.host.deliveries()),
    )


# --- a stale expected version cannot mutate ---------------------------------------------


def test_stale_start_of_a_ready_goal_changes_nothing(runtime, sample, aio):
    created = create(runtime, sample, sample.worker("direct"))
    before = _observed(runtime, created["goal"])
    for stale in (0, 2, 7):
        with refused("GOAL_STALE_VERSION"):
            aio(runtime.start(created["goal"], stale))
        with refused("GOAL_STALE_VERSION"):
            aio(runtime.cancel(created["goal"], stale, "stale"))
    assert _observed(runtime, created["goal"]) == before
    assert before[1:3] == ("READY", None)
    assert runtime.host.deliveries() == []  # nothing was admitted into the Host


def test_stale_commands_on_a_started_goal_change_nothing(runtime, sample, aio):
    view = _waiting(runtime, sample, aio)
    goal = view["goal"]
    before = _observed(runtime, goal)
    assert before[0] == 2
    for stale in (1, 3):
        with refused("GOAL_STALE_VERSION"):
            aio(runtime.start(goal, stale))
        with refused("GOAL_STALE_VERSION"):
            aio(runtime.resume(goal, stale, "stale"))
        with refused("GOAL_STALE_VERSION"):
            aio(runtime.cancel(goal, stale, "stale"))
    assert _observed(runtime, goal) == before
    # The stale cancel did not reach the Host: the delivery still waits on its question.
    assert runtime.host.status(view["delivery"]).status.value == "suspended"
    # The correct version still works, exactly once.
    aio(runtime.cancel(goal, 2, "now"))
    assert row(runtime, goal)["version"] == 3
    with refused("GOAL_STALE_VERSION"):
        aio(runtime.cancel(goal, 2, "again"))


def test_a_stale_cli_command_is_one_line_and_changes_nothing(runtime, sample, aio):
    view = _waiting(runtime, sample, aio)
    before = _observed(runtime, view["goal"])
    done = execsys(
        "goal",
        "cancel",
        view["goal"],
        "--expected-version",
        "1",
        "--reason",
        "x",
        store=sample.store,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("execsys: GOAL_STALE_VERSION")
    assert _observed(runtime, view["goal"]) == before


def test_illegal_commands_on_the_right_version_change_nothing(runtime, sample, aio):
    view = _waiting(runtime, sample, aio)
    before = _observed(runtime, view["goal"])
    with refused("GOAL_ILLEGAL_TRANSITION"):
        aio(runtime.start(view["goal"], 2))  # already started
    with refused("GOAL_ILLEGAL_TRANSITION"):
        aio(runtime.resume(view["goal"], 2, "not blocked"))  # waiting, not blocked
    assert _observed(runtime, view["goal"]) == before


# --- restart preserves phase and version --------------------------------------------------


def test_restart_preserves_phase_version_and_question(sample, aio):
    first = GoalRuntime(sample.store)
    try:
        view = _waiting(first, sample, aio)
    finally:
        first.close()
    goal = view["goal"]
    # Another process reads the same store.
    done = execsys("goal", "status", goal, "--json", store=sample.store)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    second = GoalRuntime(sample.store)
    try:
        again = second.view(goal)
        for doc in (seen, again):
            assert doc["phase"] == view["phase"] == "IMPLEMENT"
            assert doc["version"] == view["version"] == 2
            assert doc["run_status"] == "WAITING_FOR_INPUT"
            assert doc["question"] == view["question"]
            assert doc["delivery"] == view["delivery"]
        # Answering through the new runtime continues the same delivery to closeout.
        aio(second.host.answer(view["delivery"], view["question"]["correlation"], "yes"))
        closed = second.view(goal)
        assert closed["run_status"] == "CLOSED"
        assert closed["version"] == 2  # an answer is not a goal command
        assert decisions(second, goal) == ["ACCEPT"]
        assert completed(second.host, view["delivery"]).count("IMPLEMENT") == 1
    finally:
        second.close()


# --- cancellation is never success -------------------------------------------------------


def test_cancel_a_waiting_goal(runtime, sample, aio):
    view = _waiting(runtime, sample, aio)
    goal = view["goal"]
    cancelled = aio(runtime.cancel(goal, 2, "no longer needed"))
    assert cancelled["run_status"] == "CANCELLED"
    assert cancelled["version"] == 3
    assert row(runtime, goal)["state"] == "CANCELLED"
    assert runtime.host.status(view["delivery"]).status.value == "cancelled"
    # A late answer is refused and nothing runs after it.
    with refused("DELIVERY_NOT_RUNNABLE"):
        aio(runtime.host.answer(view["delivery"], view["question"]["correlation"], "late"))
    after = runtime.view(goal)
    assert after["run_status"] == "CANCELLED"
    assert after["decision"] is None
    assert "ACCEPT" not in decisions(runtime, goal)
    assert not started(runtime.host, view["delivery"]) & {"FINAL_VERIFY", "CLOSEOUT"}
    # Cancelled stays cancelled: no second cancel, no start, no resume.
    with refused("GOAL_CANCELLED"):
        aio(runtime.cancel(goal, 3, "again"))
    with refused("GOAL_ILLEGAL_TRANSITION"):
        aio(runtime.start(goal, 3))
    with refused("GOAL_ILLEGAL_TRANSITION"):
        aio(runtime.resume(goal, 3, "undo"))
    assert row(runtime, goal)["version"] == 3


def test_cancel_a_ready_goal_and_it_never_starts(runtime, sample, aio):
    created = create(runtime, sample, sample.worker("direct"))
    view = aio(runtime.cancel(created["goal"], 1, "changed my mind"))
    assert (view["run_status"], view["version"], view["delivery"]) == ("CANCELLED", 2, None)
    with refused("GOAL_ILLEGAL_TRANSITION"):
        aio(runtime.start(created["goal"], 2))
    assert runtime.host.deliveries() == []


def test_cancelling_a_closed_goal_is_refused(runtime, sample, aio):
    created = create(runtime, sample, sample.worker("direct"))
    closed = aio(runtime.start(created["goal"], 1))
    assert closed["run_status"] == "CLOSED"
    before = _observed(runtime, created["goal"])
    with refused("GOAL_ILLEGAL_TRANSITION"):
        aio(runtime.cancel(created["goal"], 2, "too late"))
    done = execsys(
        "goal", "cancel", created["goal"], "--expected-version", "2", "--reason", "late",
        store=sample.store,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.startswith("execsys: GOAL_ILLEGAL_TRANSITION")
    assert len(done.stderr.strip().splitlines()) == 1
    assert _observed(runtime, created["goal"]) == before
    assert runtime.view(created["goal"])["run_status"] == "CLOSED"
    assert decisions(runtime, created["goal"]) == ["ACCEPT"]
