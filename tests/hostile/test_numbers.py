"""Numbers canonical JSON cannot hold are refused where they enter, never INTERNAL later."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts import ErrorCode
from execution_system.cli import main
from tests.hostile.helpers import execsys, one_action

TERMINAL = '"done": {"kind": "terminal", "outcome": "succeeded"}'


def _json_spec(folder: Path, maximum: str) -> Path:
    path = folder / "spec.json"
    path.write_text(
        '{"spec": "execution-system/v1", "graph": "n", "start": "a", "input": {"type": "object",'
        ' "properties": {"n": {"type": "number", "maximum": ' + maximum + "}}},"
        ' "nodes": {"a": {"kind": "action", "executor": "x", "outputs": {}, "next": "done"},'
        f" {TERMINAL}}}}}"
    )
    return path


@pytest.mark.parametrize("maximum", ["Infinity", "-Infinity", "1e999", "9007199254740993"])
def test_a_json_spec_with_an_unrepresentable_number_is_refused_at_load(
    tmp_path: Path, maximum: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _json_spec(tmp_path, maximum)
    assert main(["graph", "check", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"execsys: DOCUMENT_NUMBER_OUT_OF_RANGE at {spec}:input.properties.n.maximum: "
    ), err


def test_a_yaml_spec_with_a_huge_integer_is_refused_by_run(tmp_path: Path) -> None:
    one_action(tmp_path, outputs="{text: {type: string, maxLength: 9007199254740993}}")
    done = execsys("run", "spec.yaml", cwd=tmp_path)
    assert done.code == 2
    assert done.line.startswith(
        "execsys: DOCUMENT_NUMBER_OUT_OF_RANGE at spec.yaml:nodes.a.outputs.text.maxLength: "
        "9007199254740993 is outside"
    )


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("input.json", '{"text": "x", "n": 1e999}'),
        ("input.json", '{"text": "x", "n": -9007199254740992}'),
        ("input.yaml", "text: x\nn: .inf\n"),
    ],
)
def test_an_input_with_an_unrepresentable_number_is_refused_before_admission(
    tmp_path: Path, name: str, text: str
) -> None:
    one_action(tmp_path)
    (tmp_path / name).write_text(text)
    done = execsys("run", "spec.yaml", "--input", name, "--json", cwd=tmp_path)
    assert done.code == 2
    assert done.json()["error"]["code"] == ErrorCode.DOCUMENT_NUMBER_OUT_OF_RANGE.value
    assert done.line.startswith(f"execsys: DOCUMENT_NUMBER_OUT_OF_RANGE at {name}:n: ")
    assert not (tmp_path / ".execsys").exists()  # nothing was admitted


def test_the_largest_exact_integer_is_still_admitted(tmp_path: Path) -> None:
    one_action(tmp_path)
    (tmp_path / "input.json").write_text('{"text": "x", "n": 9007199254740991}')
    done = execsys("run", "spec.yaml", "--input", "input.json", "--json", cwd=tmp_path)
    assert (done.code, done.json()["status"]) == (0, "completed"), done.err


@pytest.mark.parametrize("value", [2**60, -(2**53), "inf"])
def test_an_executor_reply_with_an_unrepresentable_number_is_a_protocol_error(
    tmp_path: Path, value: object
) -> None:
    # "inf" stands for a reply the executor prints as the bare token Infinity.
    one_action(tmp_path, outputs="{n: {type: number}}", reply="echo")
    agent = tmp_path / "agent.py"
    number = "float('inf')" if value == "inf" else repr(value)
    agent.write_text(
        "import json, sys\njson.load(sys.stdin)\n"
        f"print(json.dumps({{'status': 'completed', 'output': {{'n': {number}}}}}))\n"
    )
    done = execsys("run", "spec.yaml", "--json", cwd=tmp_path)
    assert done.code == 1
    assert done.json()["outcome"] == ErrorCode.EXECUTOR_PROTOCOL_ERROR.value, done.out
    assert "INTERNAL" not in done.out + done.err
