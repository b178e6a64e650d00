"""The audit's event schema is strict: a count is a JSON integer, nothing that converts to one.

pydantic's lax mode turns ``true``, ``"1"`` and ``1.0`` into the integer 1, so
an event carrying one of them as an activation, ordinal, attempt sequence or
batch position used to pass the audit. Each forgery below keeps a valid chain
and bundle digest; only the schema check can refuse it.
"""

from __future__ import annotations

from typing import Any

import pytest

from contracts import ErrorCode
from host.journal import audit_bundle, encode_bundle
from host.journal._codec import encode_fields
from tests.audit.make_fixtures import FIXTURES, Forgery

_LAX = [True, "1", 1.0]


def _forged(index: int, path: tuple[Any, ...], value: Any) -> bytes:
    forgery = Forgery((FIXTURES / "loop.bundle").read_bytes())
    target: Any = forgery.events[index]
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    head, header_line = encode_fields(forgery.header)
    lines = [header_line]
    for ordinal, event in enumerate(forgery.events, start=1):
        if not (path == ("ordinal",) and ordinal == index + 1):
            event["ordinal"] = ordinal
        event["prior"] = head
        head, line = encode_fields(event)
        lines.append(line)
    return encode_bundle(forgery.delivery, lines, forgery.records.__getitem__)


@pytest.mark.parametrize("value", _LAX, ids=repr)
@pytest.mark.parametrize(
    ("index", "path"),
    [
        (0, ("activation",)),
        (3, ("attempt", "sequence")),
        (2, ("predecessors", 0, "activation")),
    ],
    ids=["activation", "attempt-sequence", "predecessor-activation"],
)
def test_a_count_that_only_converts_to_an_integer_is_refused(
    index: int, path: tuple[Any, ...], value: Any
) -> None:
    report = audit_bundle(_forged(index, path, value))
    assert not report.ok
    first = report.violations[0]
    assert (first.code, first.ordinal) == (ErrorCode.JOURNAL_MALFORMED_RECORD, index + 1)
    assert ".".join(map(str, path)) in first.message


def test_the_same_events_with_integer_counts_audit_clean() -> None:
    assert audit_bundle(_forged(0, ("activation",), 1)).ok
