"""One set of states: the status subsets the Host's rules use, and its closed kinds."""

from __future__ import annotations

import typing

from contracts import DeliveryStatus
from contracts._status import (
    ENDED,
    FINISHED,
    HALTED,
    NEEDS_DIRECTIVE,
    NOT_RUNNABLE,
    RETIRABLE,
    RecoveryDirective,
)
from host._outbox import OutboxItem, OutboxKind

S = DeliveryStatus


def test_the_status_subsets_mean_what_their_rules_say() -> None:
    assert ENDED == {S.COMPLETED, S.FAILED, S.CANCELLED, S.RETIRED} == {s for s in S if s.terminal}
    assert ENDED - {S.RETIRED} == FINISHED
    assert HALTED == ENDED | NEEDS_DIRECTIVE
    assert {S.STOPPED, S.INTERVENTION} == NEEDS_DIRECTIVE
    assert HALTED - {S.RETIRED} == NOT_RUNNABLE
    assert FINISHED | {S.STOPPED} == RETIRABLE
    # Every status that is not halted can still run a step.
    assert set(S) - HALTED == {S.QUEUED, S.RUNNING, S.SUSPENDED, S.WAITING}


def test_directives_are_the_cli_choices() -> None:
    assert [d.value for d in RecoveryDirective] == [
        "continue",
        "restart-from-savepoint",
        "intervene",
    ]


def test_each_outbox_kind_has_exactly_one_item_shape() -> None:
    kinds = set(typing.get_args(OutboxKind))
    shapes = {
        typing.get_args(typing.get_type_hints(item)["type"])[0]
        for item in typing.get_args(OutboxItem)
    }
    assert kinds == shapes == {"record", "event", "invalidate"}
