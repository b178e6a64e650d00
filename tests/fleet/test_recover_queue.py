"""A SIGKILLed runner's delivery waits for a directive; a queued continue lets another finish it.

Also: ``input``/``resolve``/``recover --queue`` refuse what they refuse inline, and a
queued delivery takes no second request.
"""

from __future__ import annotations

import json
import signal

from tests.fleet.conftest import HERE, Fleet, stopped, wait_until


def test_a_killed_runners_delivery_is_finished_by_another_after_a_queued_continue(
    fleet: Fleet,
) -> None:
    orphan = fleet.submit(1)
    first = fleet.serve("a", "--lease-ttl", "3")
    try:
        wait_until(lambda: (orphan, "slow", "1", "1", "1") in fleet.turns(), what="slow step")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    second = fleet.serve("b")
    try:
        # The second runner drains other work but never takes the orphan on its own.
        fleet.release.touch()
        other = fleet.submit(2)
        wait_until(lambda: fleet.statuses()[other] == "completed", what="the other delivery")
        assert fleet.statuses()[orphan] == "running"
        listed = json.loads(fleet.cli("status", "--json").stdout)["needs_directive"]
        assert [entry["delivery"] for entry in listed] == [orphan]

        queued = fleet.cli(
            "recover", orphan, "--directive", "continue", "--reason", "runner died", "--queue"
        )
        assert queued.returncode == 0, queued.stderr
        # Queued, or already claimed by the runner that a NOTIFY woke at once.
        assert f"delivery {orphan}: queued" in queued.stdout or "claimed by" in queued.stdout
        again = fleet.cli("recover", orphan, "--directive", "continue", "--reason", "twice")
        assert again.returncode == 1, again.stdout
        assert "DIRECTIVE_NOT_APPLICABLE" in again.stderr or "LEASE_HELD" in again.stderr
        wait_until(lambda: fleet.statuses()[orphan] == "completed", what="the continued orphan")
    finally:
        code = stopped(second)
    assert code == 0, (fleet.root / "b.err").read_text()
    assert (fleet.root / "b.err").read_text() == "", "the second runner touched nothing else"
    turns = fleet.turns()
    assert turns[(orphan, "one", "1", "1", "1")] == 1
    assert turns[(orphan, "slow", "1", "1", "1")] == 1
    assert turns[(orphan, "slow", "1", "2", "1")] == 1
    assert turns[(orphan, "three", "1", "1", "1")] == 1
    assert set(turns.values()) == {1}
    verified = fleet.cli("journal", "verify", orphan)
    assert verified.returncode == 0, verified.stderr


def test_queue_flags_check_the_request_before_queueing(fleet: Fleet) -> None:
    fleet.release.touch()
    delivery = fleet.submit(1)
    answer = fleet.root / "answer.json"
    answer.write_text('"yes"')
    refused = fleet.cli(
        "input", delivery, "--correlation", "c-1", "--response", str(answer), "--queue"
    )
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"execsys: DELIVERY_NOT_RUNNABLE at {delivery}: ")
    refused = fleet.cli("recover", delivery, "--directive", "continue", "--reason", "x", "--queue")
    assert refused.returncode == 1 and "DIRECTIVE_NOT_APPLICABLE" in refused.stderr
    assert fleet.statuses() == {delivery: "queued"}
    assert fleet.turns() == {}


ASK = """spec: execution-system/v1
graph: fleet-ask
input: {type: object, properties: {n: {type: integer}}, required: [n]}
start: ask
nodes:
  ask: {kind: action, executor: worker, outputs: {v: {type: integer}}, next: done}
  done: {kind: terminal, outcome: succeeded}
"""


def test_a_queued_answer_is_checked_then_driven_by_a_runner(fleet: Fleet) -> None:
    root = fleet.root
    (root / "ask.yaml").write_text(ASK)
    (root / "in.json").write_text('{"n": 1}')
    (root / "answer.json").write_text('"forty-two"')
    ran = fleet.cli("run", "ask.yaml", "--input", "in.json", "--json")
    assert ran.returncode == 0, ran.stderr
    suspended = json.loads(ran.stdout)
    delivery = suspended["delivery"]
    correlation = suspended["suspension"]["correlation"]
    assert fleet.statuses() == {delivery: "suspended"}
    answer = ("input", delivery, "--response", "answer.json", "--queue", "--json")
    wrong = fleet.cli(*answer, "--correlation", "c-unknown")
    assert wrong.returncode != 0 and wrong.stderr.startswith("execsys: ")
    assert fleet.statuses() == {delivery: "suspended"}, "a refused answer queues nothing"
    queued = fleet.cli(*answer, "--correlation", correlation)
    assert queued.returncode == 0, queued.stderr
    assert json.loads(queued.stdout)["status"] == "queued"
    assert fleet.turns() == {(delivery, "ask", "1", "1", "1"): 1}, "nothing ran the answer yet"
    runner = fleet.serve("a")
    try:
        wait_until(lambda: fleet.statuses()[delivery] == "completed", what="the answered delivery")
    finally:
        code = stopped(runner)
    assert code == 0, (root / "a.err").read_text()
    assert fleet.turns() == {
        (delivery, "ask", "1", "1", "1"): 1,
        (delivery, "ask", "1", "1", "2"): 1,
    }
    verified = fleet.cli("journal", "verify", delivery)
    assert verified.returncode == 0, verified.stderr


def test_a_queued_resolution_is_checked_then_driven_by_a_runner(fleet: Fleet) -> None:
    fleet.release.touch()
    root = fleet.root
    (root / "wait.yaml").write_text((HERE / "wait.yaml").read_text())
    (root / "authority.yaml").write_text("actors: {alice: [maintainer]}\napprover: alice\n")
    (root / "in.json").write_text('{"n": 1}')
    (root / "yes.json").write_text('{"approved": true}')
    ran = fleet.cli(
        "run", "wait.yaml", "--input", "in.json", "--authority", "authority.yaml", "--json"
    )
    assert ran.returncode == 0, ran.stderr
    delivery = json.loads(ran.stdout)["delivery"]
    assert fleet.statuses() == {delivery: "waiting"}
    resolve = ("resolve", delivery, "--node", "approve", "--result", "yes.json", "--queue")
    wrong = fleet.cli(*resolve, "--actor", "alice", "--role", "reviewer")
    assert wrong.returncode != 0 and wrong.stderr.startswith("execsys: ")
    assert fleet.statuses() == {delivery: "waiting"}, "a refused resolution queues nothing"
    queued = fleet.cli(*resolve, "--actor", "alice", "--role", "maintainer", "--json")
    assert queued.returncode == 0, queued.stderr
    assert json.loads(queued.stdout)["status"] == "queued"
    assert (delivery, "three", "1", "1", "1") not in fleet.turns()
    runner = fleet.serve("a")
    try:
        wait_until(lambda: fleet.statuses()[delivery] == "completed", what="the resolved delivery")
    finally:
        code = stopped(runner)
    assert code == 0, (root / "a.err").read_text()
    assert set(fleet.turns().values()) == {1} and len(fleet.turns()) == 2
    verified = fleet.cli("journal", "verify", delivery)
    assert verified.returncode == 0, verified.stderr
