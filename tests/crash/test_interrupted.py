"""A runner killed in the middle of a writing action: nothing of the killed attempt survives.

Through the CLI, as a user meets it: ``execsys run`` is SIGKILLed while its
action has written into the workspace and left a child that keeps writing.
Then: the executor's whole process tree is gone, ``inspect`` names the
interrupted attempt and offers ``continue``, and ``recover --directive
continue`` restores the workspace to the base savepoint, journals the old
attempt as interrupted and runs a new one, whose savepoint holds nothing the
killed attempt wrote.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
EXECSYS = str(Path(sys.executable).with_name("execsys"))
SPEC = """\
spec: execution-system/v1
graph: interrupted-write
input: {type: object}
start: edit
nodes:
  edit:
    kind: action
    executor: writer
    workspace: write
    paths: [src/]
    outputs: {ok: {type: boolean}}
    next: done
  done: {kind: terminal, outcome: succeeded}
"""


def _env(root: Path) -> dict[str, str]:
    env = {**os.environ, "EXECSYS_STORE": f"sqlite:///{root}/state.db", "CRASH_DIR": str(root)}
    env.pop("EXECSYS_FAULT_KILL_AT", None)
    return env


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXECSYS, *args], env=_env(root), capture_output=True, text=True, timeout=120, cwd=root
    )


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in {"Z", "X"}


def _wait(predicate: Any, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _default_sigint() -> None:
    """SIGINT as on a terminal, whatever the test process ignores."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(root: Path) -> tuple[subprocess.Popen[str], list[int]]:
    """``execsys run`` of the writing spec, once its attempt has written and hangs."""
    (root / "spec.yaml").write_text(SPEC)
    (root / "execsys.yaml").write_text(
        f"executors:\n  writer: {{command: [{sys.executable}, {HERE / 'agents' / 'writer.py'}]}}\n"
    )
    run = subprocess.Popen(
        [EXECSYS, "run", "spec.yaml", "--json"],
        env=_env(root),
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    try:
        _wait(lambda: (root / "ready").exists())
        pids = [int(p) for p in (root / "pids").read_text().split()]
        _wait(lambda: (Path(_workspace(root)) / "src" / "late.txt").exists())
    except BaseException:
        run.kill()
        run.communicate()
        raise
    return run, pids


def _start_and_kill(root: Path) -> tuple[str, list[int]]:
    run, pids = _start(root)
    try:
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
        assert run.stdout is not None and run.stderr is not None
        run.stdout.close()
        run.stderr.close()
    listing = json.loads(_cli(root, "status", "--json").stdout)
    return str(listing["deliveries"][0]["delivery"]), pids


def _workspace(root: Path) -> str:
    found = list((root / "custody" / "workspaces").iterdir())
    assert len(found) == 1
    return str(found[0])


def _manifest(root: Path, delivery: str, savepoint: str) -> list[str]:
    from execution_system.custody import FileCustody

    custody = FileCustody(root / "custody")
    return [entry.path for entry in custody.manifest(delivery, savepoint)]  # type: ignore[arg-type]


def _events(root: Path, delivery: str) -> list[dict[str, Any]]:
    out = _cli(root, "journal", "export", delivery)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()[1:]]


@pytest.mark.slow
def test_a_killed_writing_attempt_leaves_nothing_behind(tmp_path: Path) -> None:
    delivery, pids = _start_and_kill(tmp_path)
    # The executor and the child it started in its own session died with the runner.
    _wait(lambda: not any(_alive(pid) for pid in pids), within=5)
    late = Path(_workspace(tmp_path)) / "src" / "late.txt"
    size = late.stat().st_size
    time.sleep(0.3)
    assert late.stat().st_size == size, "an orphan still writes into the workspace"

    # The dispatch is on record: inspect names the interrupted attempt and offers continue.
    view = json.loads(_cli(tmp_path, "inspect", delivery, "--json").stdout)
    assert view["status"] == "running"
    assert view["nodes"]["edit"] == {"state": "active", "attempts": 1, "activations": 1}
    assert [(a["node"], a["activation"], a["attempt"]) for a in view["interrupted"]] == [
        ("edit", 1, 1)
    ]
    assert "recover continue" in view["directives"]
    text = _cli(tmp_path, "inspect", delivery).stdout
    assert "interrupted: 'edit' activation 1 attempt 1" in text
    started = [e for e in _events(tmp_path, delivery) if e["transition"] == "work-started"]
    assert [r["kind"] for r in started[0]["refs"]] == ["launch"]
    status = _cli(tmp_path, "status").stdout
    assert delivery in status and "directive" in status

    done = _cli(
        tmp_path,
        "recover",
        delivery,
        "--directive",
        "continue",
        "--reason",
        "runner was killed",
        "--actor",
        "olga",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"

    final = json.loads(_cli(tmp_path, "inspect", delivery, "--json").stdout)
    files = _manifest(tmp_path, delivery, final["custody"]["savepoint"])
    assert "src/x.txt" not in files and "src/late.txt" not in files, files
    assert not (Path(_workspace(tmp_path)) / "src" / "x.txt").exists()

    edit = [
        (e["transition"], (e.get("attempt") or {}).get("sequence"), e["actor"]["id"])
        for e in _events(tmp_path, delivery)
        if e["node"] == "edit"
    ]
    assert edit == [
        ("work-started", 1, "host"),
        ("work-failed", 1, "olga"),
        ("retry-authorized", None, "olga"),
        ("work-started", 2, "host"),
        ("work-completed", 2, "host"),
    ]
    failed = next(e for e in _events(tmp_path, delivery) if e["transition"] == "work-failed")
    assert failed["error"]["code"] == "ATTEMPT_INTERRUPTED"
    assert "runner was killed" in failed["rationale"]
    turns = (tmp_path / "turns.log").read_text().splitlines()
    assert turns == ["edit 1 1 1", "edit 1 2 1"], "each attempt ran once, the new one fresh"
    _journal_holds(tmp_path, delivery)


def _journal_holds(tmp_path: Path, delivery: str) -> None:
    """The delivery's journal verifies as a chain and audits clean against its graph."""
    verified = json.loads(_cli(tmp_path, "journal", "verify", delivery, "--json").stdout)
    assert verified["ok"] is True
    audited = _cli(tmp_path, "journal", "audit", delivery, "--json")
    assert audited.returncode == 0, audited.stdout + audited.stderr


@pytest.mark.slow
def test_continue_kills_a_leftover_of_the_interrupted_attempt_before_it_runs_again(
    tmp_path: Path,
) -> None:
    delivery, pids = _start_and_kill(tmp_path)
    _wait(lambda: not any(_alive(pid) for pid in pids), within=5)
    # A process of the killed attempt that escaped its supervisor (still carrying the
    # attempt's invocation id and launcher): recovery must find it and kill it first.
    # One with the same invocation id but another launcher (the same delivery in
    # another store on this machine) is left alone.
    invocation = (tmp_path / "invocation").read_text()
    launcher = (tmp_path / "launcher").read_text()
    env = {**os.environ, "EXECSYS_INVOCATION": invocation}
    escaped = subprocess.Popen(["sleep", "1000"], env={**env, "EXECSYS_LAUNCHER": launcher})
    stranger = subprocess.Popen(["sleep", "1000"], env={**env, "EXECSYS_LAUNCHER": "1:1"})
    try:
        done = _cli(tmp_path, "recover", delivery, "--directive", "continue", "--reason", "crash")
        assert done.returncode == 0, done.stderr
        assert escaped.wait(timeout=10) == -signal.SIGKILL
        assert stranger.poll() is None, "another launch's process was killed"
    finally:
        for process in (escaped, stranger):
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_run_stops_the_delivery_and_restores_its_workspace(
    tmp_path: Path, sig: signal.Signals
) -> None:
    run, pids = _start(tmp_path)
    workspace = Path(_workspace(tmp_path))
    try:
        run.send_signal(sig)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 128 + sig, err
    assert err.splitlines()[-1].startswith(f"execsys: interrupted ({sig.name}): ")
    assert json.loads(out)["status"] == "stopped", "it still says where the delivery is"
    # The turn ended with its whole process tree, and nothing it wrote stays.
    assert not any(_alive(pid) for pid in pids)
    assert not (workspace / "src").exists()

    delivery = str(json.loads(out)["delivery"])
    edit = [e for e in _events(tmp_path, delivery) if e["node"] == "edit"]
    assert [e["transition"] for e in edit] == ["work-started", "work-blocked"]
    assert edit[-1]["error"]["message"] == (
        f"stopped by an operator during 'edit': its process received {sig.name}"
    )
    status = _cli(tmp_path, "status").stdout
    assert "stopped" in status and "directive" in status

    done = _cli(tmp_path, "recover", delivery, "--directive", "continue", "--reason", "go on")
    assert done.returncode == 0, done.stderr
    assert "completed" in done.stdout
    turns = (tmp_path / "turns.log").read_text().splitlines()
    assert turns == ["edit 1 1 1", "edit 1 1 1"], "the stopped turn ran again, once"
    _journal_holds(tmp_path, delivery)
