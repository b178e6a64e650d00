"""verify_lines (integrity) and replay_lines (semantics) over exports."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import host.journal
from contracts import ErrorCode, NodeId
from contracts._journal import NodeState
from host.journal import Journal, export_lines, replay_lines, verify_lines

from .scenario import POLICY, Driver, happy_journal, run_round
from .strategies import single_byte_changes

HAPPY = happy_journal()
EXPORT = b"".join(export_lines(HAPPY))


def test_exported_names() -> None:
    assert sorted(host.journal.__all__) == [
        "ActivationView",
        "AppendCommand",
        "AttemptView",
        "AuditReport",
        "BindSuccessorCommand",
        "Bundle",
        "InvalidateCommand",
        "Journal",
        "Projection",
        "SourceResolver",
        "VerifyReport",
        "Violation",
        "audit_bundle",
        "audit_journal",
        "authority_digest",
        "decode_line",
        "encode_bundle",
        "encode_record",
        "export_lines",
        "generate_key_pair",
        "load_private_key",
        "load_public_key",
        "node_decls",
        "ordinal_of",
        "parse_bundle",
        "record_digest",
        "replay_lines",
        "verify_lines",
    ]


def test_valid_export_verifies() -> None:
    report = verify_lines(io.BytesIO(EXPORT))
    assert report.to_json() == {"ok": True, "events": len(HAPPY), "head": HAPPY.head}


def test_lines_without_newlines_verify_too() -> None:
    assert verify_lines(line.rstrip(b"\n") for line in export_lines(HAPPY)).ok


def test_failure_report_json() -> None:
    report = verify_lines([b""])
    assert report.to_json() == {
        "ok": False,
        "code": "JOURNAL_MALFORMED_RECORD",
        "ordinal": 0,
    }


def test_empty_journal() -> None:
    assert verify_lines([]).code is ErrorCode.JOURNAL_EMPTY


def test_header_only_journal_is_valid() -> None:
    fresh = Driver().journal
    report = verify_lines(export_lines(fresh))
    assert (report.ok, report.events, report.head) == (True, 0, fresh.head)


def test_second_header_is_malformed() -> None:
    lines = list(export_lines(HAPPY))
    report = verify_lines([*lines, lines[0]])
    assert (report.code, report.ordinal) == (ErrorCode.JOURNAL_MALFORMED_RECORD, len(HAPPY) + 1)


def test_report_keeps_the_verified_prefix() -> None:
    lines = list(export_lines(HAPPY))
    report = verify_lines([*lines[:10], lines[11]])
    assert (report.ok, report.events, report.ordinal) == (False, 9, 10)
    assert report.head == HAPPY.events[9].prior


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_any_single_byte_change_is_detected(data: st.DataObject) -> None:
    tampered = data.draw(single_byte_changes(EXPORT))
    assert not verify_lines(io.BytesIO(tampered)).ok


def test_replay_reproduces_states_and_head() -> None:
    replayed = replay_lines(io.BytesIO(EXPORT), POLICY)
    assert replayed.head == HAPPY.head
    assert replayed.events == HAPPY.events
    assert replayed.projection() == HAPPY.projection()
    projection = replayed.projection()
    assert projection.current[NodeId("plan")] == 2
    assert projection.state(NodeId("ship")) is NodeState.COMPLETED


@settings(max_examples=25, deadline=None)
@given(rounds=st.integers(min_value=1, max_value=4), invalidate=st.booleans())
def test_replay_of_generated_journals(rounds: int, invalidate: bool) -> None:
    d = Driver()
    for number in range(1, rounds + 1):
        run_round(d, number, (("review", number - 1),) if number > 1 else ())
    if invalidate:
        d.invalidate(("plan", rounds))
    lines = list(export_lines(d.journal))
    assert verify_lines(lines).head == d.journal.head
    again = Journal.rehydrate(d.journal.header, d.journal.events, POLICY)
    assert again.projection() == d.journal.projection()
    assert replay_lines(lines, POLICY).projection() == d.journal.projection()
