"""The audit's fast lane may only save work: with it or without it, every report is the same.

``host/journal/_audit_lane.py`` accepts the Host's common events from their
bytes and folds them into the replay state; anything it cannot decide goes to
the generic path. These tests audit every fixture, and forgeries of single
fields of real events (re-chained, so only the rules can refuse them), with the
lane on and off, and require identical reports; and they check that the Host's
own events do take the lane, or it would be dead weight.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from contracts import AdmittedDelivery
from contracts._canonical import canonical_bytes
from host.journal import _audit, _audit_lane, audit_bundle, encode_bundle, parse_bundle
from host.journal._codec import encode_fields
from tests.audit.make_fixtures import EXPECTED, FIXTURES, Forgery

FORGED_FROM = ["loop.bundle", "retry.bundle", "fanout-digests.bundle"]
CLEAN = sorted(name for name, outcome in EXPECTED.items() if outcome == "ok")


def _report(data: bytes, *, lane: bool, all_violations: bool = False) -> dict[str, Any]:
    saved = _audit.LANE
    _audit.LANE = lane
    try:
        return audit_bundle(data, all_violations=all_violations).to_json()
    finally:
        _audit.LANE = saved


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every event the lane was offered, in order: True where it accepted it."""
    answers: list[bool] = []
    run = _audit_lane.AuditLane.run

    def spy(self: _audit_lane.AuditLane, lines: list[bytes], position: int) -> int:
        stop = run(self, lines, position)
        answers.extend([True] * (stop - position))
        if stop < len(lines):
            answers.append(False)  # the event it left to the generic path
        return stop

    monkeypatch.setattr(_audit_lane.AuditLane, "run", spy)
    return answers


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("all_violations", [False, True])
def test_every_fixture_gets_the_same_report_with_and_without_the_lane(
    name: str, all_violations: bool
) -> None:
    data = (FIXTURES / name).read_bytes()
    assert _report(data, lane=True, all_violations=all_violations) == _report(
        data, lane=False, all_violations=all_violations
    )


def test_the_hosts_common_events_take_the_lane(counted: list[bool]) -> None:
    for name in CLEAN:
        audit_bundle((FIXTURES / name).read_bytes())
    # Waits, barriers, failures, retries and restarts go the generic way; the
    # dependencies, starts and completions of action nodes (most events) do not.
    assert sum(counted) > len(counted) / 2, (sum(counted), len(counted))


def test_a_plain_export_takes_the_lane_too(counted: list[bool]) -> None:
    bundle = parse_bundle((FIXTURES / "loop.bundle").read_bytes())
    delivery = AdmittedDelivery.model_validate_json(canonical_bytes(bundle.delivery))
    lines = [line + b"\n" for line in bundle.journal]  # as read from a file
    report = _audit.audit_journal(lines, delivery.graph, delivery.authority)
    assert report.ok
    assert any(counted)


# --- forged single fields of real events ------------------------------------------------

# loop.bundle: plan#1 start, complete; review#1 ready, start, complete; plan#2
# ready (after review#1), start, complete; review#2 ...; done#1 ready, start, complete.
TARGETED = [
    ("attempt sequence skips one", 0, ("attempt", "sequence"), 2),
    ("attempt id reused", 6, ("attempt", "id"), "plan#1.1"),
    ("completion names another attempt", 1, ("attempt", "id"), "plan#9.1"),
    ("completion's attempt sequence", 1, ("attempt", "sequence"), 2),
    ("activation number skips one", 5, ("activation",), 3),
    ("a completed activation readied again", 5, ("activation",), 1),
    ("a request repeated", 3, ("request",), None),
    ("a predecessor that is not current", 8, ("predecessors", 0, "activation"), 1),
    ("a predecessor that is not upstream", 5, ("predecessors", 0, "node"), "plan"),
    ("a predecessor named twice", 2, ("predecessors",), "twice"),
    ("an unknown node", 3, ("node",), "nowhere"),
    ("an unknown predecessor node", 2, ("predecessors", 0, "node"), "nowhere"),
    ("the output reference missing", 1, ("refs",), []),
    ("the output reference renamed", 1, ("refs", 0, "id"), "plan#2"),
    ("a role on an automated step", 0, ("actor", "role"), "maintainer"),
    ("a count spelled true", 0, ("activation",), True),
    ("a count spelled as text", 3, ("attempt", "sequence"), "1"),
    ("a count spelled as a float", 2, ("predecessors", 0, "activation"), 1.0),
    ("the visit beyond max_visits", 5, ("activation",), 4),
    ("a start before readiness", 3, ("prior_state",), "pending"),
    ("a start of a pending activation", 2, ("transition",), "work-started"),
    ("an actor other than the Host", 3, ("actor", "id"), "runner-7"),
]


@pytest.mark.parametrize(("what", "index", "path", "value"), TARGETED, ids=[t[0] for t in TARGETED])
def test_a_targeted_forgery_gets_the_same_verdict(
    what: str, index: int, path: tuple[Any, ...], value: Any
) -> None:
    forgery = Forgery((FIXTURES / "loop.bundle").read_bytes())
    event = forgery.events[index]
    if path == ("request",):
        value = forgery.events[index - 1]["request"]
    if path == ("predecessors",):
        value = [event["predecessors"][0], event["predecessors"][0]]
    target: Any = event
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    forged = _rechained(forgery, records=True)
    with_lane = _report(forged, lane=True)
    assert with_lane == _report(forged, lane=False)
    if what != "an actor other than the Host":
        assert not with_lane["ok"], what
    else:
        assert with_lane["directives"], what


@pytest.mark.parametrize("records", [True, False], ids=["records", "digests"])
def test_a_request_of_a_generic_event_repeated_in_the_lane(records: bool) -> None:
    # retry.bundle: work#1 fails and its retry is authorized (both generic
    # events); the next start reuses the authorization's request id. The lane
    # must know the requests the generic path folded in, or it would accept it.
    forgery = Forgery((FIXTURES / "retry.bundle").read_bytes())
    authorized, started = forgery.events[2], forgery.events[3]
    assert (authorized["transition"], started["transition"]) == ("retry-authorized", "work-started")
    started["request"] = authorized["request"]
    forged = _rechained(forgery, records=records)
    with_lane = _report(forged, lane=True)
    assert with_lane == _report(forged, lane=False)
    assert (with_lane["ok"], with_lane["ordinal"]) == (False, 4)


def _unchained(edit: Any) -> bytes:
    """loop.bundle with its journal lines edited as given and only the bundle digest redone."""
    bundle = parse_bundle((FIXTURES / "loop.bundle").read_bytes())
    lines = edit(list(bundle.journal))
    records = bundle.records or {}
    return encode_bundle(bundle.delivery, lines, lambda d: json.loads(records[d]))


@pytest.mark.parametrize(
    "edit",
    [
        lambda lines: lines[:3] + lines[4:],  # an event dropped
        lambda lines: [*lines[:4], lines[3], *lines[4:]],  # an event repeated
        lambda lines: [*lines[:3], lines[4], lines[3], *lines[5:]],  # two swapped
        lambda lines: lines[:1] + lines[2:],  # the first event dropped
    ],
    ids=["dropped", "repeated", "swapped", "first-dropped"],
)
def test_a_broken_chain_gets_the_same_verdict(edit: Any) -> None:
    forged = _unchained(edit)
    with_lane = _report(forged, lane=True)
    assert with_lane == _report(forged, lane=False)
    assert not with_lane["ok"]


@pytest.mark.parametrize(
    ("rationale", "refused"),
    [(b"\x01", 4), (b"\x7f", 5), (b"\\u0041", 4), (b"\\\\", 5), (b"\t", 4)],
    ids=["control", "delete", "escape", "backslash", "tab"],
)
def test_a_line_with_unsafe_bytes_gets_the_same_verdict(rationale: bytes, refused: int) -> None:
    # The template's strings admit any byte but a quote; the lane must still
    # hand lines with controls, DEL or escapes to the strict path. DEL and an
    # escaped backslash are canonical: that line passes, and the next one's
    # prior (not re-chained) is what breaks.
    def edit(lines: list[bytes]) -> list[bytes]:
        line = lines[4].replace(b'"rationale":""', b'"rationale":"' + rationale + b'"')
        fields_start = line.index(b',"digest":"')
        end = line.index(b'"', fields_start + len(b',"digest":"sha256:'))
        body = line[:fields_start] + line[end + 1 :]
        digest = hashlib.sha256(body).hexdigest().encode()
        lines[4] = line[: fields_start + len(b',"digest":"sha256:')] + digest + line[end:]
        return lines

    forged = _unchained(edit)
    with_lane = _report(forged, lane=True)
    assert with_lane == _report(forged, lane=False)
    assert (with_lane["ok"], with_lane["ordinal"]) == (False, refused)


@pytest.mark.parametrize("records", [True, False], ids=["records", "digests"])
def test_a_terminal_completion_with_an_output_still_ends_the_delivery(records: bool) -> None:
    # done#1 completes carrying an output reference (as an action node would),
    # then plan readies again: the terminal ended the delivery, so that is
    # AUDIT_AFTER_TERMINAL, whichever path read the completion.
    forgery = Forgery((FIXTURES / "loop.bundle").read_bytes())
    done = forgery.events[13]
    assert (done["node"], done["transition"]) == ("done", "work-completed")
    output = forgery.events[10]["refs"][0]["digest"]
    done["refs"] = [{"digest": output, "id": "done#1", "kind": "output"}]
    again = json.loads(json.dumps(forgery.events[5]))  # plan#2 readied after review#1
    again.update(activation=3, request="plan/3/dependencies-satisfied")
    again["predecessors"] = [{"activation": 2, "node": "review"}]
    forgery.events.append(again)
    forged = _rechained(forgery, records=records)
    with_lane = _report(forged, lane=True)
    assert with_lane == _report(forged, lane=False)
    assert (with_lane["code"], with_lane["ordinal"]) == ("AUDIT_AFTER_TERMINAL", 15)


def test_a_line_forged_in_place_gets_the_same_verdict() -> None:
    # One event's prior (or ordinal) changed and its own digest re-taken; the
    # rest left as they were.
    for member, value in [("prior", "sha256:" + "1" * 64), ("ordinal", 9)]:

        def edit(lines: list[bytes], member: str = member, value: Any = value) -> list[bytes]:
            fields = json.loads(lines[4])
            del fields["digest"]
            fields[member] = value
            lines[4] = encode_fields(fields)[1]
            return lines

        forged = _unchained(edit)
        with_lane = _report(forged, lane=True)
        assert with_lane == _report(forged, lane=False)
        assert not with_lane["ok"]


_TOP = [
    "activation",
    "actor",
    "attempt",
    "node",
    "predecessors",
    "prior_state",
    "rationale",
    "refs",
    "request",
    "request_digest",
    "result_state",
    "time",
    "transition",
    "approvals",
    "batch",
    "error",
]


def _values(forgery: Forgery, index: int) -> st.SearchStrategy[Any]:
    """Plausible forged values for a field: other events' values, and near misses."""
    events = forgery.events
    nodes = sorted({event["node"] for event in events})
    others = st.sampled_from(events).flatmap(lambda e: st.sampled_from(sorted(e.items())))
    return st.one_of(
        others.map(lambda item: item[1]),
        st.sampled_from(nodes),
        st.integers(min_value=0, max_value=events[index]["activation"] + 2),
        st.sampled_from([True, "1", 1.0, None, [], {}, "", "x" * 257, "host", "alice"]),
        st.sampled_from(
            [
                {"id": "alice", "kind": "human", "role": None},
                {"id": "alice", "kind": "human", "role": "maintainer"},
                {"id": "runner", "kind": "automation", "role": None},
                {"id": "host", "kind": "automation", "role": "maintainer"},
                {"id": events[index]["node"] + "#1.1", "sequence": 2},
                {"id": events[index]["node"] + "#1.1", "sequence": 1},
            ]
        ),
        st.sampled_from(nodes).map(lambda n: [{"activation": 1, "node": n}]),
        st.sampled_from(nodes).map(
            lambda n: [{"digest": "sha256:" + "0" * 64, "id": n + "#1", "kind": "output"}]
        ),
    )


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data(), name=st.sampled_from(FORGED_FROM))
def test_a_forged_field_gets_the_same_verdict_with_and_without_the_lane(
    data: st.DataObject, name: str
) -> None:
    forgery = Forgery((FIXTURES / name).read_bytes())
    index = data.draw(st.integers(min_value=0, max_value=len(forgery.events) - 1))
    event = forgery.events[index]
    field = data.draw(st.sampled_from(_TOP))
    value = data.draw(_values(forgery, index))
    nested = data.draw(st.booleans())
    if nested and isinstance(event[field], dict) and event[field]:
        key = data.draw(st.sampled_from(sorted(event[field])))
        event[field] = {**event[field], key: value}
    elif nested and isinstance(event[field], list) and event[field]:
        event[field] = [json.loads(json.dumps(item)) for item in event[field]]
        item = event[field][0]
        if isinstance(item, dict):
            key = data.draw(st.sampled_from(sorted(item)))
            item[key] = value
    else:
        event[field] = value
    try:
        forged = _rechained(forgery, records=name != "fanout-digests.bundle")
    except (AttributeError, TypeError):
        reject()  # a reference whose digest is no string: the bundle writer cannot list it
    assert _report(forged, lane=True) == _report(forged, lane=False)
    assert _report(forged, lane=True, all_violations=True) == _report(
        forged, lane=False, all_violations=True
    )


def _rechained(forgery: Forgery, *, records: bool) -> bytes:
    """Re-chain the edited events and write the bundle (a forged digest gets a wrong body)."""
    head, header_line = encode_fields(forgery.header)
    lines = [header_line]
    for ordinal, event in enumerate(forgery.events, start=1):
        event["ordinal"], event["prior"] = ordinal, head
        head, line = encode_fields(event)
        lines.append(line)
    load = (lambda d: forgery.records.get(d, 0)) if records else None
    return encode_bundle(forgery.delivery, lines, load)


@pytest.mark.parametrize("records", [True, False], ids=["records", "digests"])
def test_a_completion_with_a_second_reference_gets_the_same_verdict(records: bool) -> None:
    # The lane reads a completion that references only its output record from
    # the line's bytes; one with another reference before the output (same
    # last bytes) must still have both noted, whichever path reads it.
    forgery = Forgery((FIXTURES / "loop.bundle").read_bytes())
    done = forgery.events[1]
    assert (done["node"], done["transition"]) == ("plan", "work-completed")
    extra = {"digest": forgery.put_record({"note": 1}), "id": "plan#1", "kind": "note"}
    done["refs"] = [extra, *done["refs"]]
    forged = _rechained(forgery, records=records)
    assert _report(forged, lane=True) == _report(forged, lane=False)


def test_an_execution_id_with_a_control_byte_keeps_its_lines_off_the_lane() -> None:
    # The lane spells the header's execution id into its patterns. An id with a
    # control byte is canonical only escaped (\u0001); lines that carry it raw,
    # digests re-taken over them, are not canonical, and only the strict path
    # can say so.
    bundle = parse_bundle((FIXTURES / "loop.bundle").read_bytes())
    delivery = AdmittedDelivery.model_validate_json(canonical_bytes(bundle.delivery))
    header = json.loads(bundle.journal[0])
    del header["digest"]
    header["execution"] = "d\x01x"
    head, header_line = encode_fields(header)
    lines = [header_line]
    cut = len(b',"digest":"sha256:')
    for ordinal, line in enumerate(bundle.journal[1:], start=1):
        event = json.loads(line)
        del event["digest"]
        event.update(execution="d\x01x", ordinal=ordinal, prior=head)
        raw = encode_fields(event)[1].replace(b"\\u0001", b"\x01")
        start = raw.index(b',"digest":"sha256:')
        body = raw[:start] + raw[start + cut + 65 :]
        digest = hashlib.sha256(body).hexdigest()
        head = "sha256:" + digest
        lines.append(raw[: start + cut] + digest.encode() + raw[start + cut + 64 :])

    def report(lane: bool) -> dict[str, Any]:
        saved = _audit.LANE
        _audit.LANE = lane
        try:
            return _audit.audit_journal(lines, delivery.graph, delivery.authority).to_json()
        finally:
            _audit.LANE = saved

    with_lane = report(True)
    assert with_lane == report(False)
    assert (with_lane["ok"], with_lane["ordinal"]) == (False, 1)
