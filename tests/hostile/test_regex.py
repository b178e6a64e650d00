"""Catastrophic patterns cannot stall validation; patterns RE2 cannot run are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts import ErrorCode, ExecsysError, check_schema, validation_problem
from tests.hostile.helpers import execsys, one_action, write

EVIL = "^(a+)+$"
#: Python's backtracking engine needs ~2^N steps for this against EVIL.
LONG = "a" * 5000 + "!"


def test_an_output_pattern_is_matched_in_linear_time(tmp_path: Path) -> None:
    spec = one_action(tmp_path, outputs=json.dumps({"text": {"type": "string", "pattern": EVIL}}))
    done = execsys(
        "run", str(spec), "--input", "-", "--json", cwd=tmp_path, stdin=json.dumps({"text": LONG})
    )
    assert done.code == 1
    assert done.json()["outcome"] == ErrorCode.OUTPUT_SCHEMA_VIOLATION.value


def test_an_input_pattern_property_is_matched_in_linear_time(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "patternProperties": {EVIL: {"type": "string"}},
        "additionalProperties": False,
    }
    spec = one_action(tmp_path, input_schema=json.dumps(schema))
    # A .json input: YAML caps implicit keys at 1024 characters.
    (tmp_path / "input.json").write_text(json.dumps({LONG: "x"}))
    done = execsys("run", str(spec), "--input", "input.json", cwd=tmp_path)
    assert done.code == 2
    assert done.line.startswith("execsys: INPUT_INVALID")


def test_a_wait_result_pattern_is_matched_in_linear_time(tmp_path: Path) -> None:
    result = {"type": "object", "properties": {"note": {"type": "string", "pattern": EVIL}}}
    spec = write(
        tmp_path,
        "spec.yaml",
        f"""\
        spec: execution-system/v1
        graph: hostile-wait
        input: {{type: object}}
        start: w
        nodes:
          w:
            kind: wait
            wait: decision
            result: {json.dumps(result)}
            authority: {{roles: [r], min_count: 1}}
            next: done
          done: {{kind: terminal, outcome: succeeded}}
        """,
    )
    write(tmp_path, "authority.yaml", "actors: {al: [r]}\napprover: al\n")
    started = execsys("run", str(spec), "--authority", "authority.yaml", "--json", cwd=tmp_path)
    assert started.json()["status"] == "waiting", started.err
    delivery = started.json()["delivery"]
    done = execsys(
        "resolve",
        delivery,
        "--node",
        "w",
        "--actor",
        "al",
        "--role",
        "r",
        "--result",
        "-",
        cwd=tmp_path,
        stdin=json.dumps({"note": LONG}),
    )
    assert done.code == 1
    assert done.line.startswith("execsys: WAIT_RESULT_INVALID at result.note")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "(?=a)b"},
        {"type": "string", "pattern": "(a)\\1"},
        {"type": "object", "patternProperties": {"(?<!x)y": {}}},
        {"type": "string", "pattern": "(a{1000}){1000}"},
    ],
    ids=["lookahead", "backreference", "lookbehind-key", "oversized"],
)
def test_a_pattern_re2_cannot_compile_is_refused_at_admission(
    tmp_path: Path, schema: dict[str, object]
) -> None:
    spec = one_action(tmp_path, outputs=json.dumps({"text": schema}))
    done = execsys("graph", "check", str(spec), cwd=tmp_path)
    assert done.code == 2
    assert done.line.startswith("execsys: SCHEMA_PATTERN_UNSUPPORTED at nodes.a.outputs.text.")
    assert "RE2" in done.line


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"pattern": EVIL}, LONG),
        ({"patternProperties": {EVIL: {"type": "integer"}}}, {LONG: "x", "aaa": "y"}),
        ({"patternProperties": {EVIL: {}}, "additionalProperties": False}, {LONG: 1}),
        ({"patternProperties": {EVIL: {}}, "unevaluatedProperties": False}, {LONG: 1}),
        (
            {"allOf": [{"patternProperties": {EVIL: {}}}], "unevaluatedProperties": False},
            {LONG: 1},
        ),
    ],
    ids=[
        "pattern",
        "patternProperties",
        "additionalProperties",
        "unevaluatedProperties",
        "unevaluated-through-allOf",
    ],
)
def test_every_pattern_keyword_goes_through_re2(
    schema: dict[str, object], instance: object
) -> None:
    check_schema(schema, "s")
    assert validation_problem(schema, instance) is not None


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"pattern": "^a+$"}, "aaa"),
        ({"patternProperties": {"^x": {"type": "integer"}}}, {"xa": 1, "y": "s"}),
        ({"patternProperties": {"^x": {}}, "additionalProperties": False}, {"xa": 1}),
        (
            {
                "properties": {"p": {}},
                "patternProperties": {"^x": {}},
                "unevaluatedProperties": False,
            },
            {"xa": 1, "p": 2},
        ),
        (
            {
                "$defs": {"d": {"patternProperties": {"^x": {}}}},
                "$ref": "#/$defs/d",
                "unevaluatedProperties": False,
            },
            {"xa": 1},
        ),
    ],
)
def test_matching_values_still_pass(schema: dict[str, object], instance: object) -> None:
    check_schema(schema, "s")
    assert validation_problem(schema, instance) is None


def test_a_bad_pattern_property_is_refused_by_the_schema_check() -> None:
    with pytest.raises(ExecsysError) as caught:
        check_schema({"patternProperties": {"(a)\\1": {}}}, "input")
    assert caught.value.code is ErrorCode.SCHEMA_PATTERN_UNSUPPORTED
    assert caught.value.path == "input.patternProperties.(a)\\1"
