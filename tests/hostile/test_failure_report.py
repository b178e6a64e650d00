"""A command that drives a delivery into failure says what failed, in the error shape."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.hostile.helpers import EXECSYS, execsys, one_action, write


def test_a_failed_run_exits_1_with_one_coded_line(tmp_path: Path) -> None:
    one_action(tmp_path, reply={"status": "failed", "reason": "lint-broke", "retryable": False})
    done = execsys("run", "spec.yaml", cwd=tmp_path)
    assert done.code == 1
    delivery = done.out.split()[1].rstrip(":")
    assert done.line == (
        f"execsys: NODE_FAILED at {delivery}: the delivery failed: node 'a' failed: lint-broke"
    )


def test_a_failed_run_with_json_carries_the_error_object(tmp_path: Path) -> None:
    one_action(tmp_path, outputs="{text: {type: integer}}")
    done = execsys("run", "spec.yaml", "--json", cwd=tmp_path)
    assert done.code == 1
    document = done.json()
    assert document["status"] == "failed"
    assert document["error"]["code"] == "OUTPUT_SCHEMA_VIOLATION"
    assert document["error"]["path"] == document["delivery"]
    assert done.line.startswith(f"execsys: OUTPUT_SCHEMA_VIOLATION at {document['delivery']}: ")


def test_a_terminal_failure_outcome_is_delivery_failed(tmp_path: Path) -> None:
    write(
        tmp_path,
        "spec.yaml",
        """\
        spec: execution-system/v1
        graph: ends-failed
        input: {type: object}
        start: w
        nodes:
          w:
            kind: wait
            wait: decision
            result: {type: object}
            authority: {roles: [r], min_count: 1}
            next: bad
          bad: {kind: terminal, outcome: failed}
        """,
    )
    write(tmp_path, "authority.yaml", "actors: {al: [r]}\napprover: al\n")
    write(tmp_path, "result.json", "{}")
    started = execsys("run", "spec.yaml", "--authority", "authority.yaml", "--json", cwd=tmp_path)
    assert started.code == 0 and started.err == ""
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
        "result.json",
        "--json",
        cwd=tmp_path,
    )
    assert done.code == 1
    assert done.json()["error"]["code"] == "DELIVERY_FAILED"
    assert done.line.startswith(f"execsys: DELIVERY_FAILED at {delivery}: the delivery failed")
    # Reading the status of a failed delivery is not itself a failure.
    shown = execsys("status", delivery, "--json", cwd=tmp_path)
    assert (shown.code, shown.err) == (0, "")
    assert "error" not in shown.json()


def test_a_recover_that_ends_failed_exits_1_with_one_coded_line(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    # First turn: hang (the runner is killed); the re-dispatched turn fails.
    one_action(tmp_path)
    (tmp_path / "agent.py").write_text(
        "import json, pathlib, sys, time\n"
        "json.load(sys.stdin)\n"
        f"marker = pathlib.Path({str(marker)!r})\n"
        "if not marker.exists():\n"
        "    marker.write_text('x')\n"
        "    time.sleep(120)\n"
        "print(json.dumps({'status': 'failed', 'reason': 'second-try-broke'}))\n"
    )
    runner = subprocess.Popen(
        [EXECSYS, "run", "spec.yaml", "--json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        for _ in range(600):
            if marker.exists():
                break
            time.sleep(0.1)
        assert marker.exists(), "the action never started"
    finally:
        os.killpg(runner.pid, signal.SIGKILL)
        runner.communicate()
    listed = execsys("status", "--json", cwd=tmp_path).json()
    delivery = listed["deliveries"][0]["delivery"]
    done = execsys(
        "recover",
        delivery,
        "--directive",
        "continue",
        "--reason",
        "retry",
        "--json",
        cwd=tmp_path,
    )
    assert done.code == 1, done.out + done.err
    assert done.json()["error"]["code"] == "NODE_FAILED"
    assert done.line.startswith(f"execsys: NODE_FAILED at {delivery}: the delivery failed: ")
    assert "second-try-broke" in done.line
