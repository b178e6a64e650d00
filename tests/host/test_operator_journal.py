"""Who stopped or cancelled a delivery, and why, is in its journal.

A stop halts the active attempt with the operator's name and reason; a cancel
ends every open activation as failed (``DELIVERY_CANCELLED``) by the operator,
in one checkpoint transaction, and nothing can continue it afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from contracts import ErrorCode, ExecsysError, InvocationRequest
from host.journal import audit_bundle, encode_bundle, verify_lines
from tests.host.harness import graph_doc, make_delivery, reply

HERE = Path(__file__).resolve().parent
EXECSYS = str(Path(sys.executable).with_name("execsys"))
SLOW_SPEC = """
spec: execution-system/v1
graph: slow
start: work
nodes:
  work: {kind: action, executor: slow, workspace: write, outputs: {ok: {type: boolean}}, next: done}
  done: {kind: terminal, outcome: succeeded}
"""


def _events(lines: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines[1:]]


def _ask_graph() -> dict[str, Any]:
    return graph_doc(
        {
            "ask": {
                "kind": "action",
                "executor": "ask",
                "outputs": {"n": {"type": "integer"}},
                "next": "done",
            },
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        "ask",
    )


def test_cancel_ends_the_open_activation_by_the_operator(harness: Any) -> None:
    async def ask(request: InvocationRequest) -> Any:
        if request.turn == 1:
            return {"status": "needs-input", "question": "which?", "session": "s"}
        return reply({"n": 1})

    h = harness({"ask": ask})
    delivery = make_delivery(_ask_graph())
    report = h.run(delivery)
    assert report.status.value == "suspended"
    correlation = report.suspension.correlation
    did = delivery.delivery_id
    cancelled = asyncio.run(h.host.cancel(did, actor="bob", reason="no longer needed"))
    assert cancelled.status.value == "cancelled"
    events = _events(h.host.journal_lines(did))
    tail = [(e["node"], e["transition"], e["actor"]["id"]) for e in events[-2:]]
    assert tail == [("ask", "block-cleared", "bob"), ("ask", "work-failed", "bob")]
    assert events[-1]["error"]["code"] == ErrorCode.DELIVERY_CANCELLED.value
    assert "no longer needed" in events[-1]["error"]["message"]
    assert verify_lines(h.host.journal_lines(did)).ok
    assert h.host.inspect(did).mismatches == ()
    bundle = encode_bundle(h.host.delivery_document(did), h.host.journal_lines(did), h.host.record)
    assert audit_bundle(bundle).violations == []
    with pytest.raises(ExecsysError):
        asyncio.run(h.host.answer(did, correlation, 1))
    with pytest.raises(ExecsysError) as refused:
        asyncio.run(h.host.recover(did, "continue", actor="bob", reason="oops"))
    assert refused.value.code is ErrorCode.DIRECTIVE_NOT_APPLICABLE


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXECSYS, *args], env=env, capture_output=True, text=True, check=False)


@pytest.mark.slow
def test_a_stop_and_a_cancel_through_the_cli_are_journaled_with_actor_and_reason(
    tmp_path: Path,
) -> None:
    (tmp_path / "spec.yaml").write_text(SLOW_SPEC)
    (tmp_path / "execsys.yaml").write_text(
        f"executors:\n  slow: {{command: [{sys.executable}, {HERE / 'agents' / 'slow.py'}]}}\n"
    )
    env = {
        **os.environ,
        "EXECSYS_STORE": f"sqlite:///{tmp_path}/state.db",
        "EXECSYS_TEST_PIDS": str(tmp_path / "pids"),
    }
    runner = subprocess.Popen(
        [EXECSYS, "run", str(tmp_path / "spec.yaml"), "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (tmp_path / "pids").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    delivery = json.loads(_cli(env, "status", "--json").stdout)["deliveries"][0]["delivery"]
    stopped = _cli(
        env, "stop", delivery, "--actor", "alice", "--reason", "maintenance window", "--json"
    )
    runner.communicate(timeout=60)
    assert json.loads(stopped.stdout)["status"] == "stopped", stopped.stderr
    events = [
        json.loads(line) for line in _cli(env, "journal", "export", delivery).stdout.splitlines()
    ]
    halt = events[-1]
    assert (halt["transition"], halt["actor"]["id"]) == ("work-blocked", "alice")
    assert "maintenance window" in halt["error"]["message"]

    from execution_system._compose import open_runner

    runner_host = open_runner(env["EXECSYS_STORE"])
    try:
        done = asyncio.run(runner_host.host.cancel(delivery, actor="carol", reason="abandoned"))
        assert done.status.value == "cancelled"
        lines = runner_host.host.journal_lines(delivery)
    finally:
        runner_host.close()
    last = _events(lines)[-2:]
    assert [(e["transition"], e["actor"]["id"]) for e in last] == [
        ("block-cleared", "carol"),
        ("work-failed", "carol"),
    ]
    assert json.loads(_cli(env, "journal", "verify", delivery, "--json").stdout)["ok"] is True
