"""One writer per delivery, proven with real processes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
EXECSYS = Path(sys.executable).with_name("execsys")

SPEC = """
spec: execution-system/v1
graph: ask-once
start: ask
nodes:
  ask:
    kind: action
    executor: asker
    outputs: {answer: {type: string}}
    next: done
  done: {kind: terminal, outcome: succeeded}
"""


def _setup(tmp: Path) -> tuple[dict[str, str], Path]:
    (tmp / "spec.yaml").write_text(SPEC)
    (tmp / "execsys.yaml").write_text(
        f"executors:\n  asker: {{command: [{sys.executable}, {HERE / 'agents' / 'ask.py'}]}}\n"
    )
    (tmp / "answer.json").write_text('"left"')
    log = tmp / "turns.log"
    env = {**os.environ, "EXECSYS_STORE": f"sqlite:///{tmp}/state.db", "EXECSYS_TEST_LOG": str(log)}
    return env, log


def _execsys(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXECSYS), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.slow
# Ten rounds of three processes each: well past the default per-test bound on a loaded machine.
@pytest.mark.timeout(900)
def test_two_processes_answering_one_question_continue_it_exactly_once(tmp_path: Path) -> None:
    for round_no in range(6):
        tmp = tmp_path / f"r{round_no}"
        tmp.mkdir()
        env, log = _setup(tmp)
        started = _execsys(env, "run", str(tmp / "spec.yaml"), "--json")
        assert started.returncode == 0, started.stderr
        report = json.loads(started.stdout)
        assert report["status"] == "suspended"
        delivery, correlation = report["delivery"], report["suspension"]["correlation"]
        racers = [
            subprocess.Popen(
                [
                    str(EXECSYS),
                    "input",
                    delivery,
                    "--correlation",
                    correlation,
                    "--response",
                    str(tmp / "answer.json"),
                    "--json",
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        outputs = [p.communicate(timeout=120) for p in racers]
        results = [(p.returncode, out, err) for p, (out, err) in zip(racers, outputs, strict=True)]
        codes = sorted(code for code, _, _ in results)
        assert codes == [0, 1], results
        loser = next(err for code, _, err in results if code == 1)
        assert "CORRELATION_USED" in loser or "LEASE_HELD" in loser, loser
        assert loser.count("\n") == 1, "one line"
        turns = log.read_text().splitlines()
        assert turns == ["ask 1 1 1", "ask 1 1 2"], "no executor turn ran twice"
        final = json.loads(_execsys(env, "status", delivery, "--json").stdout)
        assert final["status"] == "completed"


def test_a_killed_holder_does_not_lock_the_operator_out(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from host._lease import LeaseManager
            from host.storage.sqlite import SqliteStorage as Store
            from host.storage.sqlite import connect
            store = Store(connect(Path({str(tmp_path / "s.db")!r}))); store.setup()
            from host._lease import holder_name
            leases = LeaseManager(store, Path({str(tmp_path / "locks")!r}), holder_name("v"), 3600)
            print(leases.acquire("d-x"), flush=True)
            time.sleep(600)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "1"
    from host._lease import LeaseManager
    from host.storage.sqlite import SqliteStorage as Store
    from host.storage.sqlite import connect

    store = Store(connect(tmp_path / "s.db"))
    mine = LeaseManager(store, tmp_path / "locks", "operator", 30)
    from contracts import ExecsysError

    with pytest.raises(ExecsysError) as held:
        mine.acquire("d-x")
    assert held.value.code.value == "LEASE_HELD"
    holder.send_signal(signal.SIGKILL)
    holder.communicate()
    # A probe (what 'execsys status' does) must not use up the evidence of death.
    assert mine.state("d-x")["state"] == "gone"
    assert mine.state("d-x")["state"] == "gone"
    started = time.monotonic()
    assert mine.acquire("d-x", wait_s=5) == 2, "a new token fences the dead holder"
    assert time.monotonic() - started < 1.0
    mine.release("d-x")
    store.conn.close()


def test_a_fenced_writer_commits_nothing(tmp_path: Path) -> None:
    env, _ = _setup(tmp_path)
    report = json.loads(_execsys(env, "run", str(tmp_path / "spec.yaml"), "--json").stdout)
    db = sqlite3.connect(tmp_path / "state.db")
    before = db.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    events_before = db.execute("SELECT count(*) FROM execsys_journal").fetchone()[0]
    # Another holder took the delivery over (its token is newer); our late write must fail.
    from host.langgraph._saver import HostSaver
    from host.storage.sqlite import SqliteStorage as Store
    from host.storage.sqlite import connect

    store = Store(connect(tmp_path / "state.db"))
    saver = HostSaver(store, journals=None, derive_status=lambda v, m: ("running", None, {}))  # type: ignore[arg-type]
    saver.tokens[report["delivery"]] = 1
    db.execute("UPDATE execsys_leases SET token = 7")
    db.commit()
    from contracts import ExecsysError

    config = {"configurable": {"thread_id": report["delivery"], "checkpoint_ns": ""}}
    with pytest.raises(ExecsysError) as fenced:
        saver.put(config, {"id": "late", "channel_values": {}}, {}, {})  # type: ignore[arg-type,typeddict-item]
    assert fenced.value.code.value == "LEASE_FENCED"
    assert db.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == before
    assert db.execute("SELECT count(*) FROM execsys_journal").fetchone()[0] == events_before
    store.conn.close()
    db.close()


def _two_hosts(tmp_path: Path) -> tuple[Any, Any, Any]:
    from tests.host.harness import Harness, make_delivery, reply

    async def done(request: Any) -> Any:
        return reply({"ok": True})

    doc = {
        "spec": "execution-system/v1",
        "graph": "t",
        "start": "a",
        "nodes": {
            "a": {"kind": "action", "executor": "e", "outputs": {"ok": {"type": "boolean"}},
                  "next": "z"},
            "z": {"kind": "terminal", "outcome": "succeeded"},
        },
    }  # fmt: skip
    first, second = Harness(tmp_path, {"e": done}), Harness(tmp_path, {"e": done})
    delivery = make_delivery(doc)
    assert first.run(delivery).status.value == "completed"
    return first, second, delivery


def _take_over(stale: Any, fresh: Any, delivery: str) -> None:
    """``stale`` holds the lease and stops renewing; ``fresh`` takes it once it expires."""
    stale.leases.ttl_s = 0.05
    assert stale.leases.acquire(delivery) >= 1
    time.sleep(0.1)
    fresh.leases.acquire(delivery, wait_s=5)


@pytest.mark.parametrize(
    "write",
    ["intervention", "stopped", "cancelled", "clear-stop", "retire", "checkpoint", "custody"],
)
def test_every_host_write_refuses_a_stale_token(tmp_path: Path, write: str) -> None:
    import asyncio

    from contracts import ExecsysError
    from host import _cancel, _retire, _stop, _stop_requests
    from host._lease import FencedCustody

    first, second, delivery = _two_hosts(tmp_path)
    did = delivery.delivery_id
    try:
        _take_over(first.host, second.host, did)
        before = (first.host.store.delivery(did), first.host.store.journal_lines(did))
        attempts = {
            "intervention": lambda: first.host.mark_intervention(did, "late"),
            "stopped": lambda: _stop._mark_stopped(first.host, did, "late"),
            "cancelled": lambda: _cancel._cancel_row(first.host, did, "late"),
            "clear-stop": lambda: _stop_requests.clear_stop(first.host.leases, did),
            "retire": lambda: asyncio.run(_retire._retire_locked(first.host, did, "t", "me")),
            "checkpoint": lambda: asyncio.run(first.host.invalidate(did, "a", reason="late")),
            "custody": lambda: FencedCustody(first.custody, first.host.leases).advance(did, "sp"),
        }
        head = first.custody.head(did)
        if write == "checkpoint":
            # A whole operation: its lease grant is refused while the new holder lives.
            with pytest.raises(ExecsysError) as held:
                attempts[write]()
            assert held.value.code.value == "LEASE_HELD"
            saver = first.host.substrate.saver  # type: ignore[attr-defined]
            saver.tokens[did] = first.host.leases.token(did)
            config = {"configurable": {"thread_id": did, "checkpoint_ns": ""}}
            with pytest.raises(ExecsysError) as fenced:
                saver.put(config, {"id": "late", "channel_values": {}}, {}, {})
        else:
            with pytest.raises(ExecsysError) as fenced:
                attempts[write]()
        assert fenced.value.code.value == "LEASE_FENCED"
        after = (first.host.store.delivery(did), first.host.store.journal_lines(did))
        assert after == before, "nothing of the refused write was applied"
        assert first.custody.head(did) == head
        assert first.host.store.read("SELECT count(*) FROM execsys_retirements") == [(0,)]
    finally:
        second.close()
        first.close()


def test_a_holder_whose_loop_hangs_past_the_ttl_is_fenced_and_stops(tmp_path: Path) -> None:
    import asyncio

    from contracts import ExecsysError
    from tests.host.harness import Harness, make_delivery, reply

    box: dict[str, Any] = {}

    async def hang(request: Any) -> Any:
        # The holder's whole event loop is blocked (no renewal can run) while a rival
        # on the same store waits out the TTL and takes the delivery.
        box["token"] = box["rival"].acquire(request.delivery, wait_s=10)
        store = box["rival"].store
        box["before"] = (
            store.delivery(request.delivery),
            store.journal_lines(request.delivery),
        )
        return reply({"ok": True})

    doc = {
        "spec": "execution-system/v1",
        "graph": "t",
        "start": "a",
        "nodes": {
            "a": {"kind": "action", "executor": "e", "outputs": {"ok": {"type": "boolean"}},
                  "next": "z"},
            "z": {"kind": "terminal", "outcome": "succeeded"},
        },
    }  # fmt: skip
    holder = Harness(tmp_path, {"e": hang})
    rival = Harness(tmp_path, {}, custody=holder.custody)
    box["rival"] = rival.host.leases
    holder.host.leases.ttl_s = 0.2
    delivery = make_delivery(doc)
    try:
        with pytest.raises(ExecsysError) as fenced:
            asyncio.run(holder.host.run(delivery))
        assert fenced.value.code.value == "LEASE_FENCED"
        assert box["token"] == 2
        did = delivery.delivery_id
        after = (rival.host.store.delivery(did), rival.host.store.journal_lines(did))
        assert after == box["before"], "the fenced holder applied nothing"
        assert rival.host.inspect(did).lease.state == "held"
        rival.host.leases.release(did)
        (listed,) = rival.host.needs_directive()
        assert listed.delivery == did and listed.status == "running"
    finally:
        rival.close()
        holder.close()


def test_host_writes_go_through_the_fenced_transaction() -> None:
    # A write the Host makes for a delivery must prove, in its own transaction, that
    # the writer still holds the lease (LeaseManager.transaction, or the saver's own
    # check). Unfenced transactions are allowed only where no holder writes: an
    # operator's stop request, and the goal rows (an application's, of no delivery; the
    # lease's own writes use Storage.lease_transaction). SQLite's saver checks the token
    # first thing in each of its two transactions; PostgreSQL's writes through
    # Storage.fenced_transaction (the store's own check), and opens a plain one only to
    # refuse a write for which it holds no token.
    allowed = {
        "_lease.py": 1,
        "_stop_requests.py": 1,
        "_goals.py": 3,
        "_saver.py": 2,
        "_pg_saver.py": 1,
    }
    root = HERE.parents[1] / "host"
    opened = ("store.transaction(", "store.step_transaction(")  # the pipelined one too
    found = {
        path.name: sum(path.read_text().count(call) for call in opened)
        for path in sorted(root.rglob("*.py"))
        if any(call in path.read_text() for call in opened) and "storage" not in path.parts
    }
    assert found == allowed


def test_a_fence_check_trusts_memory_only_for_half_a_ttl_after_the_store_confirmed(
    tmp_path: Path,
) -> None:
    from contracts import ExecsysError
    from host._lease import LeaseManager
    from host.storage.sqlite import SqliteStorage, connect

    store = SqliteStorage(connect(tmp_path / "state.db"))
    store.setup()
    leases = LeaseManager(store, tmp_path / "locks", "here:1:a", ttl_s=2.0)
    reads: list[str] = []
    real = store.lease
    store.lease = lambda delivery: reads.append(delivery) or real(delivery)  # type: ignore[method-assign]
    try:
        assert leases.acquire("d-1") == 1
        leases.check("d-1")
        assert reads == [], "just granted: nobody else can hold it yet"
        # A rival writes the row (as only a machine whose clock runs ahead could, this early).
        with store.transaction() as tx:
            tx.put_lease("d-1", "elsewhere:2:b", 2, time.time() + 30)
        leases.check("d-1")
        time.sleep(1.05)  # past half the TTL: the store is asked again
        with pytest.raises(ExecsysError) as fenced:
            leases.check("d-1")
        assert fenced.value.code.value == "LEASE_FENCED" and reads == ["d-1"]
        # A renewal that finds the lease taken over ends the trust at once.
        assert leases.renew("d-1") is False
        with pytest.raises(ExecsysError):
            leases.check("d-1")
        assert reads == ["d-1", "d-1"]
    finally:
        leases.close()
        store.close()
