"""Executor bindings a process cannot receive are refused when the config is loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from execution_system.cli import main
from tests.hostile.helpers import execsys, one_action, write


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("execsys.yaml", 'executors:\n  ag: {command: [python3, "agent.py\\0x"]}\n'),
        ("execsys.json", '{"executors": {"ag": {"command": ["python3", "agent.py\\u0000"]}}}'),
    ],
)
def test_a_nul_byte_in_a_command_is_refused_before_admission(
    tmp_path: Path, name: str, text: str
) -> None:
    one_action(tmp_path)
    write(tmp_path, name, text)
    done = execsys("run", "spec.yaml", "--config", name, cwd=tmp_path)
    assert done.code == 2
    assert done.line.startswith(
        f"execsys: CONFIG_INVALID at {name}:executors.ag.command: argument 1 contains a NUL byte"
    )
    assert not (tmp_path / ".execsys").exists()  # nothing admitted, nothing in intervention


@pytest.mark.parametrize(
    ("env", "shown"), [('{"A=B": x}', "'A=B'"), ('{"A": "x\\0"}', "'A'"), ('{"": x}', "''")]
)
def test_an_environment_no_process_can_receive_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], env: str, shown: str
) -> None:
    one_action(tmp_path)
    write(
        tmp_path,
        "execsys.yaml",
        f"executors:\n  ag: {{command: [python3, agent.py], env: {env}}}\n",
    )
    assert main(["run", str(tmp_path / "spec.yaml"), "--store", f"sqlite:///{tmp_path}/s.db"]) == 2
    err = capsys.readouterr().err
    assert f"executors.ag.env: environment variable {shown} cannot be passed" in err, err


@pytest.mark.parametrize(
    ("binding", "where", "message"),
    [
        ("{scripted: [1]}", "executors.ag.scripted.0", "Input should be an object"),
        ("{scripted: []}", "executors.ag.scripted", "at least 1 item"),
        ("{python: 'not a function'}", "executors.ag.python", "should match pattern"),
        ("{}", "executors.ag", "a binding names one of 'command', 'python' or 'scripted'"),
    ],
)
def test_a_bad_binding_is_reported_against_the_kind_it_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], binding: str, where: str, message: str
) -> None:
    one_action(tmp_path)
    write(tmp_path, "execsys.yaml", f"executors:\n  ag: {binding}\n")
    assert main(["run", str(tmp_path / "spec.yaml"), "--store", f"sqlite:///{tmp_path}/s.db"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"execsys: CONFIG_INVALID at {tmp_path}/execsys.yaml:{where}: "), err
    assert message in err
    assert "command: Field required" not in err
