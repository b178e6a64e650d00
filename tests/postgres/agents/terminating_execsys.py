"""``execsys``, except that the Nth checkpoint commit of ``run`` or ``serve`` loses its connection.

With ``EXECSYS_TEST_TERMINATE_AT=N``, just before the Nth checkpoint commit of a
``run`` or ``serve`` command is sent, another connection calls ``pg_terminate_backend`` on the
server process of the connection that step holds: its writes travel as one
statement on that connection (decision 0146), which then fails on the way to the
server. Other commands run unchanged.
"""

from __future__ import annotations

import os
import sys

import psycopg

from execution_system.cli import main
from host import _faults
from host.storage.postgres import _batch

_AT = int(os.environ.get("EXECSYS_TEST_TERMINATE_AT", "0") or 0)
_seen = {"put": 0, "backend": 0}
_stock = _faults.boundary
_cursor = _batch.StepCursor.__init__


def _remember(
    self: _batch.StepCursor,
    conn: psycopg.Connection,  # type: ignore[type-arg]
    *,
    counted: bool = True,
    **given: bool,
) -> None:
    if counted:  # a step's transaction, not a lease's
        _seen["backend"] = conn.info.backend_pid
    _cursor(self, conn, counted=counted, **given)


def _boundary(kind: str, phase: str) -> None:
    if kind == "put" and phase == "before":
        _seen["put"] += 1
        if _seen["put"] == _AT:
            with psycopg.connect(os.environ["EXECSYS_STORE"], autocommit=True) as other:
                other.execute("SELECT pg_terminate_backend(%s)", (_seen["backend"],))
    _stock(kind, phase)


if __name__ == "__main__":
    if sys.argv[1:2] in (["run"], ["serve"]):
        _faults.boundary = _boundary
        _batch.StepCursor.__init__ = _remember  # type: ignore[method-assign]
    raise SystemExit(main(sys.argv[1:]))
