"""``execsys``, except that the Nth checkpoint commit of ``run`` loses its connection.

With ``EXECSYS_TEST_TERMINATE_AT=N``, just before the Nth checkpoint transaction of a
``run`` command commits, another connection calls ``pg_terminate_backend`` on the
server process of every other session of this database that is inside a
transaction: this process's open step transaction (idle in it, or, since the step's
statements are pipelined, still reported active until the COMMIT's sync). Other
commands run unchanged.
"""

from __future__ import annotations

import os
import sys

import psycopg

from execution_system.cli import main
from host import _faults

_AT = int(os.environ.get("EXECSYS_TEST_TERMINATE_AT", "0") or 0)
_seen = {"put": 0}
_stock = _faults.boundary


def _boundary(kind: str, phase: str) -> None:
    if kind == "put" and phase == "before":
        _seen["put"] += 1
        if _seen["put"] == _AT:
            with psycopg.connect(os.environ["EXECSYS_STORE"], autocommit=True) as other:
                other.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND xact_start IS NOT NULL"
                )
    _stock(kind, phase)


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"]:
        _faults.boundary = _boundary
    raise SystemExit(main(sys.argv[1:]))
