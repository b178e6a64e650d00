"""Messages that used to point the wrong way now name what is actually wrong."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from execution_system.cli import main
from tests.hostile.helpers import execsys, one_action, write

WAIT_SPEC = """\
spec: execution-system/v1
graph: two-approvals
input: {type: object}
start: w
nodes:
  w:
    kind: wait
    wait: approval
    result: {type: object, properties: {approved: {type: boolean}, note: {type: string}}}
    authority: {roles: [r], min_count: 2, distinct_actors: true}
    next: done
  done: {kind: terminal, outcome: succeeded}
"""


def test_a_bad_output_port_name_is_not_called_a_node_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = one_action(tmp_path, outputs='{"bad port!": {type: string}}')
    assert main(["graph", "check", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "execsys: SPEC_INVALID_VALUE at nodes.a.outputs.bad port!: "
        "invalid output port name 'bad port!'"
    ), err
    assert "node id" not in err


def test_file_too_large_gives_the_size_not_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = one_action(tmp_path)
    big = tmp_path / "input.yaml"
    big.write_text("x: " + "a" * (4 * 1024 * 1024 + 997))
    assert main(["run", str(spec), "--input", str(big)]) == 2
    err = capsys.readouterr().err
    assert f"FILE_TOO_LARGE at {big}: document is {big.stat().st_size} bytes" in err, err


def test_an_unknown_correlation_points_at_a_listing_that_shows_correlations(
    tmp_path: Path,
) -> None:
    one_action(tmp_path, reply={"status": "needs-input", "question": "why?", "session": "s"})
    started = execsys("run", "spec.yaml", "--json", cwd=tmp_path)
    delivery = started.json()["delivery"]
    correlation = started.json()["suspension"]["correlation"]
    done = execsys(
        "input", delivery, "--correlation", "c-nope", "--response", "-", cwd=tmp_path, stdin="{}"
    )
    assert done.code == 1
    assert done.line.startswith("execsys: CORRELATION_UNKNOWN at c-nope: ")
    assert f"'execsys status {delivery}'" in done.line
    # ... and that listing really shows it.
    assert correlation in execsys("status", delivery, cwd=tmp_path).out


def test_a_timeout_without_retry_is_a_timeout(tmp_path: Path) -> None:
    one_action(tmp_path)
    (tmp_path / "agent.py").write_text("import time\ntime.sleep(60)\n")
    write(
        tmp_path, "execsys.yaml", "executors:\n  ag: {command: [python3, agent.py], timeout_s: 1}\n"
    )
    done = execsys("run", "spec.yaml", "--json", cwd=tmp_path)
    assert done.code == 1
    assert done.json()["outcome"] == "EXECUTOR_TIMEOUT"
    assert "RETRIES_EXHAUSTED" not in done.out + done.err


def test_a_differing_second_approval_names_the_field(tmp_path: Path) -> None:
    write(tmp_path, "spec.yaml", WAIT_SPEC)
    write(tmp_path, "authority.yaml", "actors: {al: [r], bo: [r]}\napprover: al\n")
    started = execsys("run", "spec.yaml", "--authority", "authority.yaml", "--json", cwd=tmp_path)
    delivery = started.json()["delivery"]

    def resolve(actor: str, result: object) -> object:
        return execsys(
            "resolve",
            delivery,
            "--node",
            "w",
            "--actor",
            actor,
            "--role",
            "r",
            "--result",
            "-",
            cwd=tmp_path,
            stdin=json.dumps(result),
        )

    first = resolve("al", {"approved": True, "note": "ok"})
    assert first.code == 0, first.err
    second = resolve("bo", {"approved": False, "note": "ok"})
    assert second.code == 1
    assert second.line.startswith(
        "execsys: WAIT_RESULT_INVALID at result.approved: the result differs from the earlier "
        "approvals of this wait in 'approved'"
    ), second.line


@pytest.mark.parametrize("flag", ["--input", "--authority"])
def test_a_fifo_nobody_writes_is_refused_not_waited_on(tmp_path: Path, flag: str) -> None:
    one_action(tmp_path)
    os.mkfifo(tmp_path / "pipe")
    done = execsys("run", "spec.yaml", flag, "pipe", cwd=tmp_path)  # bounded by helpers.BOUND_S
    assert done.code == 2
    assert done.line == (
        "execsys: FILE_NOT_REGULAR at pipe: is not a regular file (a FIFO, socket or device) "
        "(expected a regular file, or '-' to read standard input)"
    )


def test_standard_input_is_still_read(tmp_path: Path) -> None:
    one_action(tmp_path)
    done = execsys(
        "run", "spec.yaml", "--input", "-", "--json", cwd=tmp_path, stdin='{"text": "x"}'
    )
    assert done.json()["status"] == "completed", done.err
