"""Operator directives, stop and retirement, with real processes where it matters."""

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
from tests.host.harness import graph_doc, make_delivery, reply
from tests.support.memory_custody import MemoryCustody

HERE = Path(__file__).resolve().parent
EXECSYS = str(Path(sys.executable).with_name("execsys"))


def _two_steps() -> dict[str, Any]:
    return graph_doc(
        {
            "first": {
                "kind": "action",
                "executor": "first",
                "outputs": {"n": {"type": "integer"}},
                "next": "second",
            },
            "second": {
                "kind": "action",
                "executor": "second",
                "inputs": {"n": "first.n"},
                "outputs": {"n": {"type": "integer"}},
                "on_failure": "rescue",
                "next": "done",
            },
            "rescue": {"kind": "terminal", "outcome": "blocked"},
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        "first",
    )


def test_an_uncertain_restore_is_resolved_by_intervene_with_a_result(harness: Any) -> None:
    custody = MemoryCustody(reject_nodes={"second"}, uncertain_restore=True)
    h = harness(
        {
            "first": lambda r: asyncio.sleep(0, reply({"n": 1})),
            "second": lambda r: asyncio.sleep(0, reply({"n": 2})),
        },
        custody=custody,
    )
    delivery = make_delivery(_two_steps())
    assert h.run(delivery).status.value == "intervention"
    assert h.inspect(delivery).nodes["second"].state == "blocked"
    with pytest.raises(ExecsysError) as bad:
        asyncio.run(
            h.host.recover(
                delivery.delivery_id, "intervene", reason="fix", node="second", result={"n": "two"}
            )
        )
    assert bad.value.code is ErrorCode.OUTPUT_SCHEMA_VIOLATION
    assert h.host.status(delivery.delivery_id).status.value == "intervention", "unchanged"
    custody.uncertain_restore = False
    report = asyncio.run(
        h.host.recover(
            delivery.delivery_id,
            "intervene",
            actor="olga",
            reason="checked by hand",
            node="second",
            result={"n": 2},
        )
    )
    assert (report.status.value, report.outcome) in {
        ("completed", "succeeded"),
        ("failed", "blocked"),
    }
    done = [
        e
        for e in h.events(delivery)
        if e["node"] == "second" and e["transition"] in {"work-completed", "work-failed"}
    ]
    assert done[-1]["actor"]["id"] == "olga"


def test_intervene_fail_follows_the_failure_rules(harness: Any) -> None:
    custody = MemoryCustody(reject_nodes={"second"}, uncertain_restore=True)
    h = harness(
        {
            "first": lambda r: asyncio.sleep(0, reply({"n": 1})),
            "second": lambda r: asyncio.sleep(0, reply({"n": 2})),
        },
        custody=custody,
    )
    delivery = make_delivery(_two_steps())
    h.run(delivery)
    custody.uncertain_restore = False
    report = asyncio.run(
        h.host.recover(
            delivery.delivery_id, "intervene", reason="give up", node="second", fail=True
        )
    )
    assert (report.status.value, report.outcome) == ("failed", "blocked")


def test_continue_reruns_the_halted_turn_and_lists_nothing_afterwards(harness: Any) -> None:
    calls: list[tuple[str, int]] = []

    async def second(req: InvocationRequest) -> Any:
        calls.append((req.invocation, req.turn))
        return reply({"n": 2})

    custody = MemoryCustody(reject_nodes={"second"}, uncertain_restore=True)
    h = harness(
        {"first": lambda r: asyncio.sleep(0, reply({"n": 1})), "second": second}, custody=custody
    )
    delivery = make_delivery(_two_steps())
    h.run(delivery)
    listed = h.host.needs_directive()
    assert [item.delivery for item in listed] == [delivery.delivery_id]
    custody.uncertain_restore = False
    custody.reject_nodes.clear()
    report = asyncio.run(h.host.recover(delivery.delivery_id, "continue", reason="restored"))
    assert report.status.value == "completed"
    assert calls[0] == calls[1], "the same invocation and turn (its idempotency key)"
    assert h.host.needs_directive() == []


def test_restart_from_savepoint_invalidates_the_abandoned_future(harness: Any) -> None:
    async def ask(req: InvocationRequest) -> Any:
        if req.turn == 1:
            return {"status": "needs-input", "question": "?", "session": "s"}
        return reply({"n": 3})

    h = harness({"first": lambda r: asyncio.sleep(0, reply({"n": 1})), "second": ask})
    delivery = make_delivery(_two_steps())
    first = h.run(delivery)
    savepoints = h.inspect(delivery).savepoints
    with pytest.raises(ExecsysError) as unknown:
        asyncio.run(
            h.host.recover(
                delivery.delivery_id, "restart-from-savepoint", reason="x", savepoint="sp-nope"
            )
        )
    assert unknown.value.code is ErrorCode.SAVEPOINT_UNKNOWN
    report = asyncio.run(
        h.host.recover(
            delivery.delivery_id,
            "restart-from-savepoint",
            reason="redo",
            savepoint=savepoints[0].savepoint,
        )
    )
    assert report.status.value == "suspended"
    with pytest.raises(ExecsysError) as stale:
        asyncio.run(h.host.answer(delivery.delivery_id, first.suspension.correlation, 1))
    assert stale.value.code is ErrorCode.CORRELATION_STALE
    invalidated = {
        (e["node"], e["activation"])
        for e in h.events(delivery)
        if e["transition"] == "work-invalidated"
    }
    assert ("second", 1) in invalidated
    report = asyncio.run(h.host.answer(delivery.delivery_id, report.suspension.correlation, 1))
    assert report.status.value == "completed"


def test_retirement_is_owner_scoped_idempotent_and_final(harness: Any) -> None:
    h = harness(
        {
            "first": lambda r: asyncio.sleep(0, reply({"n": 1})),
            "second": lambda r: asyncio.sleep(0, reply({"n": 2})),
        }
    )
    delivery = make_delivery(_two_steps())
    did = delivery.delivery_id
    assert h.run(delivery).status.value == "completed"
    head = h.inspect(delivery).journal
    fact = asyncio.run(h.host.retire(did, "ticket-1"))
    assert fact.performed and fact.journal == head
    again = asyncio.run(h.host.retire(did, "ticket-1"))
    assert not again.performed and again.fact == fact.fact
    with pytest.raises(ExecsysError) as other:
        asyncio.run(h.host.retire(did, "ticket-2"))
    assert other.value.code is ErrorCode.RETIRE_AUTHORIZATION_CONFLICT
    with pytest.raises(ExecsysError) as refused:
        asyncio.run(h.host.recover(did, "continue", reason="x"))
    assert refused.value.code is ErrorCode.DELIVERY_RETIRED
    assert h.host.status(did).status.value == "retired"
    assert h.host.store.latest_checkpoint(did) is None


def test_a_running_delivery_cannot_be_retired(harness: Any) -> None:
    async def ask(req: InvocationRequest) -> Any:
        return {"status": "needs-input", "question": "?", "session": "s"}

    h = harness({"first": lambda r: asyncio.sleep(0, reply({"n": 1})), "second": ask})
    delivery = make_delivery(_two_steps())
    h.run(delivery)
    with pytest.raises(ExecsysError) as refused:
        asyncio.run(h.host.retire(delivery.delivery_id, "t"))
    assert refused.value.code is ErrorCode.RETIRE_NOT_APPLICABLE


SLOW_SPEC = """
spec: execution-system/v1
graph: slow
start: work
nodes:
  work: {kind: action, executor: slow, workspace: write, outputs: {ok: {type: boolean}}, next: done}
  done: {kind: terminal, outcome: succeeded}
"""


def _env(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "EXECSYS_STORE": f"sqlite:///{tmp}/state.db",
        "EXECSYS_TEST_PIDS": str(tmp / "pids"),
    }


@pytest.mark.slow
def test_stop_kills_the_running_executor_and_continue_finishes(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SLOW_SPEC)
    (tmp_path / "execsys.yaml").write_text(
        f"executors:\n  slow: {{command: [{sys.executable}, {HERE / 'agents' / 'slow.py'}]}}\n"
    )
    env = _env(tmp_path)
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
    pid = int((tmp_path / "pids").read_text().split()[0])
    listing = json.loads(
        subprocess.run(
            [EXECSYS, "status", "--json"], env=env, capture_output=True, text=True, check=True
        ).stdout
    )
    delivery = listing["deliveries"][0]["delivery"]
    stopped = subprocess.run(
        [EXECSYS, "stop", delivery, "--json"], env=env, capture_output=True, text=True, check=False
    )
    out, _ = runner.communicate(timeout=60)
    assert json.loads(stopped.stdout)["status"] == "stopped"
    assert json.loads(out)["status"] == "stopped"
    assert (
        not Path(f"/proc/{pid}").exists()
        or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    )
    listing = json.loads(
        subprocess.run(
            [EXECSYS, "status", "--json"], env=env, capture_output=True, text=True, check=True
        ).stdout
    )
    assert listing["needs_directive"][0]["delivery"] == delivery
    refused = subprocess.run(
        [EXECSYS, "input", delivery, "--correlation", "c-x", "--response", "-"],
        env=env,
        input="1",
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode == 1 and refused.stderr.startswith("execsys: ")
    resumed = subprocess.run(
        [
            EXECSYS,
            "recover",
            delivery,
            "--directive",
            "continue",
            "--reason",
            "maintenance over",
            "--json",
        ],
        env={**env, "SLOW_S": "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert json.loads(resumed.stdout)["status"] == "completed", resumed.stderr


@pytest.mark.slow
def test_two_processes_retiring_at_once_clean_up_once(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SLOW_SPEC)
    (tmp_path / "execsys.yaml").write_text(
        f"executors:\n  slow: {{command: [{sys.executable}, {HERE / 'agents' / 'slow.py'}]}}\n"
    )
    env = {**_env(tmp_path), "SLOW_S": "0"}
    started = subprocess.run(
        [EXECSYS, "run", str(tmp_path / "spec.yaml"), "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    delivery = json.loads(started.stdout)["delivery"]
    racers = [
        subprocess.Popen(
            [EXECSYS, "retire", delivery, "--authorization", "t-1", "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    facts = [json.loads(p.communicate(timeout=60)[0]) for p in racers]
    assert sorted(f["performed"] for f in facts) == [False, True]
    assert facts[0]["fact"] == facts[1]["fact"]
