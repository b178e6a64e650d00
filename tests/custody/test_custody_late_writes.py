"""A workspace change that predates the turn's capability is refused, never committed.

Such a change comes from outside the turn: a process left over from an earlier
step (an orphan that outlived its runner), or someone editing the workspace by
hand between steps. Validation refuses it with ``CUSTODY_UNATTRIBUTED_WRITE``;
what the turn itself wrote after its capability was issued is accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from custody_helpers import DELIVERY, Clock, make_site, preview, settle

from contracts import ErrorCode
from execution_system.custody import FileCustody


def test_a_write_before_the_capability_is_refused(
    custody: FileCustody, opened: Callable[[], Path]
) -> None:
    workspace = opened()
    (workspace / "src" / "late.txt").write_text("written after the last step committed\n")
    settle()
    site = make_site()
    capability = custody.issue(site, "write", ("src",))
    (workspace / "src" / "own.txt").write_text("written by this turn\n")
    verdict = custody.validate(preview(capability.token, site))
    assert not verdict.accepted
    assert (verdict.code, verdict.path) == (ErrorCode.CUSTODY_UNATTRIBUTED_WRITE, "src/late.txt")


def test_what_the_turn_writes_right_after_its_capability_is_accepted(
    custody: FileCustody, opened: Callable[[], Path]
) -> None:
    workspace = opened()
    for attempt in range(1, 20):  # the coarse clock's tick must never refuse the turn's own write
        site = make_site(attempt=attempt)
        capability = custody.issue(site, "write", ("src",))
        (workspace / "src" / f"own-{attempt}.txt").write_text("mine\n")
        verdict = custody.validate(preview(capability.token, site))
        assert verdict.accepted, verdict
        assert verdict.savepoint is not None
        custody.advance(DELIVERY, verdict.savepoint)


def test_a_capability_issued_by_another_process_is_judged_on_paths_alone(
    custody: FileCustody, opened: Callable[[], Path], clock: Clock
) -> None:
    workspace = opened()
    (workspace / "src" / "late.txt").write_text("late\n")
    settle()
    site = make_site()
    capability = custody.issue(site, "write", ("src",))
    # A fresh instance (another process) has no record of when the capability was issued.
    other = FileCustody(custody.root, clock=clock)
    verdict = other.validate(preview(capability.token, site))
    assert verdict.accepted, verdict
