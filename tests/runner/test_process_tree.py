"""No process of an executor's turn outlives the turn, or the runner that started it.

Each test runs real processes: a command executor that leaves children behind
(in its process group, or in a session of their own via ``setsid``), and in the
last test a real runner process killed with SIGKILL in the middle of the turn.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from contracts import CommandBinding, Completed, InvocationRequest
from host._launches import _start_time, launcher_tag, reap
from runner import Executors

REQUEST = InvocationRequest(
    delivery="d-tree", node="n", activation=1, invocation="inv-tree-1", attempt=1, input={}
)


def _gone(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return True
    return fields[0] in {"Z", "X"}


def _eventually_gone(pids: list[int], within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if all(_gone(pid) for pid in pids):
            return True
        time.sleep(0.02)
    return False


def _wait_for(path: Path, lines: int, within: float = 10.0) -> list[str]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists():
            found = path.read_text().split()
            if len(found) >= lines:
                return found[:lines]
        time.sleep(0.02)
    raise AssertionError(f"{path} never got {lines} lines")


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def test_background_processes_are_killed_when_the_turn_ends(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = (
        'sleep 100 & echo $! > "$PIDS"; setsid sleep 100 & echo $! >> "$PIDS"; '
        'echo \'{"status": "completed", "output": {}}\''
    )
    binding = CommandBinding(command=("/bin/sh", "-c", script), env={"PIDS": str(pids)})
    started = time.monotonic()
    result = asyncio_run(binding, tmp_path)
    leftovers = [int(x) for x in pids.read_text().split()]
    try:
        assert isinstance(result, Completed), result
        assert _eventually_gone(leftovers), "a background process outlived its turn"
        assert time.monotonic() - started < 3
    finally:
        _kill(leftovers)


def test_every_process_of_a_turn_carries_its_invocation(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = (
        'setsid sleep 100 & echo $! > "$PIDS"; sleep 0.5; '
        'echo \'{"status": "completed", "output": {}}\''
    )
    runner = subprocess.Popen([sys.executable, "-c", _RUNNER, str(tmp_path), script])
    child = 0
    try:
        child = int(_wait_for(pids, 1)[0])
        assert b"EXECSYS_INVOCATION=inv-tree-1\0" in _environ(child)
        launcher = launcher_tag({"pid": runner.pid, "started": _start_time(runner.pid)})
        assert f"EXECSYS_LAUNCHER={launcher}\0".encode() in _environ(child)
    finally:
        runner.wait(timeout=20)
        _kill([child] if child else [])


def test_recovery_kills_only_the_leftovers_of_the_launch_it_names() -> None:
    """Another store's delivery may share an invocation id: its processes are left alone."""
    ours, theirs = "4242:777", "4343:888"
    procs = {
        tag: subprocess.Popen(
            ["sleep", "100"],
            env={**os.environ, "EXECSYS_INVOCATION": "inv-shared", "EXECSYS_LAUNCHER": tag},
        )
        for tag in (ours, theirs)
    }
    try:
        launch = {"runner": {"host": socket.gethostname(), "pid": 4242, "started": 777}}
        found = reap(launch, "inv-shared")
        assert found.killed == (procs[ours].pid,), found
        assert procs[ours].wait(timeout=5) == -signal.SIGKILL
        assert procs[theirs].poll() is None, "another launch's process was killed"
    finally:
        _kill([p.pid for p in procs.values()])
        for proc in procs.values():
            proc.wait(timeout=5)


_RUNNER = textwrap.dedent(
    """
    import asyncio, sys
    from contracts import CommandBinding, InvocationRequest
    from runner import Executors

    folder, script = sys.argv[1], sys.argv[2]
    request = InvocationRequest(
        delivery="d-tree", node="n", activation=1, invocation="inv-tree-1", attempt=1, input={}
    )
    binding = CommandBinding(
        command=("/bin/sh", "-c", script), env={"PIDS": folder + "/pids"}, timeout_s=120
    )
    asyncio.run(Executors()(request, binding, capability="cap", workspace=folder))
    """
)


def test_a_runner_killed_with_sigkill_takes_the_whole_turn_with_it(tmp_path: Path) -> None:
    # The executor forks a child into its own session (setsid) that keeps writing
    # into the workspace; the runner is then SIGKILLed mid-turn. Both must die at
    # once, and the workspace must stop changing.
    pids = tmp_path / "pids"
    ticks = tmp_path / "ticks"
    script = (
        f"setsid sh -c 'while true; do echo x >> {ticks}; sleep 0.05; done' & echo $! > \"$PIDS\"; "
        'echo $$ >> "$PIDS"; sleep 100'
    )
    runner = subprocess.Popen([sys.executable, "-c", _RUNNER, str(tmp_path), script])
    leftovers: list[int] = []
    try:
        leftovers = [int(pid) for pid in _wait_for(pids, 2)]
        _wait_for(ticks, 2)
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=10)
        assert _eventually_gone(leftovers), "the executor's tree outlived its runner"
        size = ticks.stat().st_size
        time.sleep(0.3)
        assert ticks.stat().st_size == size, "something still writes into the workspace"
    finally:
        _kill(leftovers)
        with contextlib.suppress(ProcessLookupError):
            runner.kill()


def asyncio_run(binding: CommandBinding, workspace: Path) -> object:
    import asyncio

    return asyncio.run(Executors()(REQUEST, binding, capability="cap", workspace=str(workspace)))
