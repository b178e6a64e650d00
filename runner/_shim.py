"""The per-turn supervisor a command executor runs under (a standalone script).

Started by the runner as ``python -I -S _shim.py RUNNER_PID ARGV...`` in a new
session, it forks and execs the executor with its own stdin, stdout and stderr
(the runner's pipes), then stays as the executor's parent so that no process of
the turn can outlive it:

* it is a child subreaper (``PR_SET_CHILD_SUBREAPER``): descendants orphaned by
  their parent — including ones that called ``setsid`` to leave the process
  group — are reparented to the shim instead of to PID 1;
* it asks for ``SIGTERM`` when its parent dies (``PR_SET_PDEATHSIG``), so a
  runner killed with SIGKILL still takes the whole turn with it;
* when the executor exits (or on ``SIGTERM``: a deadline, a stop, the runner's
  death) it sends every remaining descendant SIGTERM, gives them a second to
  clean up, SIGKILLs what is left, reaps them all, and only then exits, with
  the executor's own exit status (or by the same signal).

It imports nothing but the standard library and keeps no state, so it starts
in a few milliseconds. Linux only (``prctl``); elsewhere the prctl calls are
skipped and only the process-group kill of the runner applies.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
START_FAILED = 127
GRACE_S = 1.0
"""How long the turn's processes get to exit after SIGTERM before SIGKILL."""
MARKER = "execsys-shim: cannot start"


class _Terminate(Exception):
    pass


def _on_term(signum: int, frame: object) -> None:
    # The parent-death signal can arrive more than once (once per dying thread of
    # a multi-threaded runner): the first one ends the turn, later ones must not
    # interrupt the cleanup it started.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    raise _Terminate


def _prctl(option: int, value: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _children_map() -> dict[int, list[tuple[int, bytes]]]:
    children: dict[int, list[tuple[int, bytes]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces or parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 2:
            continue
        children.setdefault(int(fields[1]), []).append((int(entry), fields[0]))
    return children


def _descendants() -> tuple[list[int], list[int]]:
    children = _children_map()
    found: list[int] = []
    live: list[int] = []
    todo = [os.getpid()]
    while todo:
        for pid, state in children.get(todo.pop(), []):
            found.append(pid)
            todo.append(pid)
            if state != b"Z":
                live.append(pid)
    return found, live


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_tree(grace_s: float) -> None:
    """End every descendant: SIGTERM once each, up to ``grace_s`` to exit, then SIGKILL."""
    switch = time.monotonic() + grace_s
    deadline = switch + 5.0
    asked: set[int] = set()
    while time.monotonic() < deadline:
        found, live = _descendants()
        if not found:
            return
        hard = time.monotonic() >= switch
        for pid in live:
            if hard or pid not in asked:
                # Once only: a second SIGTERM would interrupt the cleanup the first began.
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL if hard else signal.SIGTERM)
                asked.add(pid)
        _reap()
        time.sleep(0.005)


def main() -> None:
    """Supervise one executor turn: see the module docstring."""
    parent = int(sys.argv[1])
    argv = sys.argv[2:]
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGHUP, _on_term)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os._exit(START_FAILED)  # the runner died before we could ask to follow it
    try:
        child = os.fork()
        if child == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
            try:
                os.execvp(argv[0], argv)
            except OSError as exc:
                os.write(2, f"{MARKER}: {argv[0]}: {exc.strerror}\n".encode())
            os._exit(START_FAILED)
        # stdin/stdout stay with the executor alone: our copies would hold the pipes.
        for fd in (0, 1, 2):
            os.close(fd)
        status: int | None = None
        while status is None:
            pid, raw = os.waitpid(-1, 0)
            if pid == child:
                status = raw
    except _Terminate:
        _kill_tree(GRACE_S)
        os._exit(1)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _kill_tree(GRACE_S)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main()
