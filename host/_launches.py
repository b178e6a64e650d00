"""Who dispatched a turn, and whether anything of an interrupted turn still runs.

Every action attempt is journaled as started, with a *launch record*, before its
executor is invoked: the runner process that dispatches it (host name, pid and
the process's start time, so a reused pid is not mistaken for it) and the
invocation id. Every process of a command turn carries that id in its
environment (:data:`contracts.LAUNCH_ENV`). Before a directive re-dispatches an
interrupted attempt, the Host looks for processes still carrying its id, kills
them and confirms they are gone; if the attempt was launched on another machine
it cannot tell, and the delivery stays in intervention.

Linux only: it reads ``/proc``. Elsewhere :func:`leftovers` reports that it
cannot tell.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts import LAUNCH_ENV, LAUNCHER_ENV

_PROC = Path("/proc")


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of its stat)."""
    try:
        stat = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[19]) if len(fields) > 19 else None


_IDENTITY: dict[int, dict[str, Any]] = {}


def runner_identity() -> dict[str, Any]:
    """The current process as a dispatcher: host, pid and start time (read once per pid)."""
    pid = os.getpid()
    found = _IDENTITY.get(pid)
    if found is None:
        found = {"host": socket.gethostname(), "pid": pid, "started": _start_time(pid)}
        _IDENTITY.clear()
        _IDENTITY[pid] = found
    return dict(found)


def launcher_tag(runner: dict[str, Any]) -> str:
    """A dispatcher's value of :data:`contracts.LAUNCHER_ENV`: ``<pid>:<start time>``."""
    return f"{runner.get('pid')}:{runner.get('started')}"


def launch_record(
    delivery: str, node: str, activation: int, attempt: int, invocation: str
) -> dict[str, Any]:
    """The record a ``work-started`` event references: who launches which invocation."""
    return {
        "kind": "launch",
        "runner": runner_identity(),
        "delivery": delivery,
        "node": node,
        "activation": activation,
        "attempt": attempt,
        "invocation": invocation,
        "env": LAUNCH_ENV,
    }


@dataclass(frozen=True)
class Leftovers:
    """What :func:`reap` found of an interrupted launch."""

    killed: tuple[int, ...] = ()
    """Processes that were still running and were killed."""
    unknown: str = ""
    """Why it cannot tell whether processes remain ('' when it can)."""


def _carrying(*markers: bytes) -> list[int]:
    """Processes (other than this one) whose environment holds every one of ``markers``."""
    found = []
    me = os.getpid()
    for entry in os.listdir(_PROC):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            environ = b"\0" + (_PROC / entry / "environ").read_bytes()
        except OSError:
            continue
        if all(marker in environ for marker in markers):
            found.append(int(entry))
    return found


def _marker(name: str, value: str) -> bytes:
    return b"\0" + f"{name}={value}".encode() + b"\0"


def _alive(pid: int) -> bool:
    try:
        stat = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def reap(launch: dict[str, Any] | None, invocation: str, *, wait_s: float = 5.0) -> Leftovers:
    """Kill whatever still runs of ``invocation`` and confirm it is gone."""
    if not _PROC.is_dir():
        return Leftovers(unknown="this system has no /proc to look for leftover processes")
    runner = (launch or {}).get("runner") or {}
    if runner.get("host") not in (None, socket.gethostname()):
        return Leftovers(
            unknown=f"the attempt was launched on host {runner.get('host')!r}; "
            "its processes cannot be checked from here"
        )
    markers = [_marker(LAUNCH_ENV, invocation)]
    if runner.get("pid") is not None:
        # Only this launch's processes: the same invocation id may run for another
        # store's delivery on this machine, launched by another runner.
        markers.append(_marker(LAUNCHER_ENV, launcher_tag(runner)))
    found = [pid for pid in _carrying(*markers) if _alive(pid)]
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        except PermissionError:
            return Leftovers(killed=tuple(found), unknown=f"process {pid} cannot be killed")
    deadline = time.monotonic() + wait_s
    while any(_alive(pid) for pid in found):
        if time.monotonic() >= deadline:
            alive = [pid for pid in found if _alive(pid)]
            return Leftovers(killed=tuple(found), unknown=f"processes {alive} do not die")
        time.sleep(0.01)
    return Leftovers(killed=tuple(found))
