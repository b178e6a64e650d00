"""Properties over the four parsers hostile input reaches first.

Any input ends in admission (a value) or one catalogued error, never another
exception and never INTERNAL. Time is bounded by the per-test timeout (no
example may hang: catastrophic patterns are drawn on purpose).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import (
    Completed,
    ErrorCode,
    ExecsysError,
    Failed,
    NeedsInput,
    check_schema,
    validation_problem,
)
from execution_system import admit, parse_document, parse_graph
from host.journal import decode_line, verify_lines
from runner import parse_factory_config, parse_result
from tests.strategies import (
    catastrophic_patterns,
    hostile_values,
    patterns,
    store_urls,
)

FIXTURES = Path(__file__).parents[1] / "fixtures"
SPEC_TEXT = (FIXTURES / "specs" / "valid" / "triage-review.yaml").read_bytes()
JOURNAL = (FIXTURES / "journal" / "valid-loop.jsonl").read_bytes().splitlines()
FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
pytestmark = pytest.mark.timeout(300)


def _catalogued(exc: ExecsysError) -> None:
    assert exc.code is not ErrorCode.INTERNAL, exc
    assert "\n" not in exc.one_line()


def _coded(exc: ExecsysError, code: ErrorCode) -> None:
    assert exc.code is code, exc
    assert "\n" not in exc.one_line()


def _load_spec(data: bytes, name: str) -> None:
    try:
        graph = parse_graph(parse_document(data, name=name, json_only=name.endswith(".json")))
        admit(graph, {})
    except ExecsysError as exc:
        _catalogued(exc)


@FUZZ
@given(st.binary(max_size=512))
def test_any_bytes_are_a_spec_or_one_catalogued_error(data: bytes) -> None:
    _load_spec(data, "spec.yaml")
    _load_spec(data, "spec.json")


@FUZZ
@given(st.data())
def test_a_corrupted_spec_is_a_spec_or_one_catalogued_error(data: st.DataObject) -> None:
    text = bytearray(SPEC_TEXT)
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        at = data.draw(st.integers(0, len(text) - 1), label="at")
        text[at : at + data.draw(st.integers(0, 3))] = data.draw(st.binary(max_size=4))
    _load_spec(bytes(text), "spec.yaml")


@FUZZ
@given(st.data())
def test_hostile_values_in_a_spec_are_admitted_or_refused(data: st.DataObject) -> None:
    document = parse_document(SPEC_TEXT, name="spec.yaml")
    ports = document["nodes"]["plan"]["outputs"]
    ports["checks"] = data.draw(
        st.fixed_dictionaries(
            {"type": st.just("string")},
            optional={
                "pattern": patterns,
                "maxLength": hostile_values,
                "patternProperties": st.dictionaries(patterns, st.just({}), max_size=2),
            },
        ),
        label="schema",
    )
    document["input"]["properties"]["ticket"] = {"maxLength": data.draw(hostile_values)}
    try:
        admit(parse_graph(json.loads(json.dumps(document, default=str))), {"ticket": "t"})
    except ExecsysError as exc:
        _catalogued(exc)
    except ValueError:
        pass  # json.dumps refused the value (NaN/inf pass; sets, bytes become str)


@FUZZ
@given(catastrophic_patterns, st.integers(20, 5000), st.sampled_from(["!", "b", "", "aa!"]))
def test_a_checked_pattern_validates_in_bounded_time(pattern: str, n: int, tail: str) -> None:
    for schema, instance in (
        ({"type": "string", "pattern": pattern}, "a" * n + tail),
        (
            {
                "type": "object",
                "patternProperties": {pattern: {"type": "integer"}},
                "additionalProperties": False,
            },
            {"a" * n + tail: "x"},
        ),
    ):
        try:
            check_schema(schema, "s")
        except ExecsysError as exc:
            _coded(exc, ErrorCode.SCHEMA_PATTERN_UNSUPPORTED)
            continue
        validation_problem(schema, instance)  # a hang fails the test by its timeout


@FUZZ
@given(
    hostile_values
    | st.fixed_dictionaries(
        {
            "status": st.sampled_from(["completed", "needs-input", "failed", "other"]),
            "output": hostile_values,
            "question": hostile_values,
            "session": hostile_values,
            "reason": hostile_values,
            "retryable": hostile_values,
        }
    )
)
def test_any_executor_reply_is_a_result(reply: Any) -> None:
    result = parse_result(copy.deepcopy(reply))
    assert isinstance(result, Completed | NeedsInput | Failed)
    if isinstance(result, Failed):
        assert result.code is not ErrorCode.INTERNAL


def test_a_deeply_nested_reply_is_a_protocol_error() -> None:
    nested: list[Any] = []
    for _ in range(100_000):
        nested = [nested]
    result = parse_result({"status": "completed", "output": {"x": nested}})
    assert isinstance(result, Failed) and result.code is ErrorCode.EXECUTOR_PROTOCOL_ERROR


@FUZZ
@given(st.binary(max_size=300))
def test_any_journal_line_decodes_or_is_refused_with_a_code(line: bytes) -> None:
    try:
        decode_line(line)
    except ExecsysError as exc:
        _catalogued(exc)


@FUZZ
@given(st.data())
def test_a_corrupted_journal_verifies_or_names_its_code(data: st.DataObject) -> None:
    lines = list(JOURNAL)
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        which = data.draw(st.integers(0, len(lines) - 1), label="line")
        line = bytearray(lines[which])
        kind = data.draw(st.sampled_from(["flip", "cut", "drop", "dup", "swap"]), label="kind")
        if kind == "flip" and line:
            at = data.draw(st.integers(0, len(line) - 1))
            line[at] = data.draw(st.integers(0, 255))
            lines[which] = bytes(line)
        elif kind == "cut":
            lines[which] = bytes(line[: data.draw(st.integers(0, len(line)))])
        elif kind == "drop" and len(lines) > 1:
            del lines[which]
        elif kind == "dup":
            lines.insert(which, lines[which])
        elif kind == "swap" and len(lines) > 1:
            other = data.draw(st.integers(0, len(lines) - 1))
            lines[which], lines[other] = lines[other], lines[which]
    report = verify_lines(lines)
    if not report.ok:
        assert report.code is not None and report.code is not ErrorCode.INTERNAL


@FUZZ
@given(store_urls)
def test_any_store_url_is_a_usable_store_or_store_url_invalid(url: str) -> None:
    try:
        config = parse_factory_config({"engine": "langgraph", "store": url})
    except ExecsysError as exc:
        _coded(exc, ErrorCode.STORE_URL_INVALID)
        return
    if config.store.startswith("sqlite:"):
        path = config.store.removeprefix("sqlite:///")
        assert path.strip(" /") and "\x00" not in path
        assert not path.strip(" /").startswith(":memory:")
        assert "?" not in path and "#" not in path
    else:
        assert config.store.startswith(("postgresql://", "postgres://"))
