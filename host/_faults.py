"""Fault injection for crash tests: SIGKILL this process at a chosen write boundary.

Set ``EXECSYS_FAULT_KILL_AT=put:3:before`` (or ``after``; or ``put_writes:N:...``,
or one of custody's own writes: ``custody-validate``, ``custody-advance``,
``custody-restore``, ``custody-seed-flush``, ``custody-seed-publish``,
``custody-prune-log``, ``custody-prune-manifests``, ``custody-collect``; or the
custody archive's ``archive-publish``, a savepoint sent to the store) and the
process kills itself with SIGKILL inside the Nth such write, just before it takes
effect or just after. Tests use it to prove, with a
real kill of a real process, that checkpoint, journal, records and status
commit or vanish together. Unset, it costs one dictionary lookup per write.
"""

from __future__ import annotations

import os
import signal

_SPEC = os.environ.get("EXECSYS_FAULT_KILL_AT", "")
_counts: dict[str, int] = {}


def boundary(kind: str, phase: str) -> None:
    """Called at every write boundary; kills the process if this is the chosen one."""
    if not _SPEC:
        return
    want_kind, want_n, want_phase = [*_SPEC.split(":"), "", "", ""][:3]
    if kind != want_kind:
        return
    if phase == "before":
        _counts[kind] = _counts.get(kind, 0) + 1
    if phase == want_phase and _counts.get(kind, 0) == int(want_n or 0):
        os.kill(os.getpid(), signal.SIGKILL)
