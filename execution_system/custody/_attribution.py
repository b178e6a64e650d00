"""Unattributed writes: changes older than the capability of the turn that reports them.

A file whose ctime precedes the instant its turn's capability was issued was
not written by that turn. Only the process that issued the capability knows
that instant, so the check applies where the issuing process also validates
(the normal case: one runner per delivery).
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import suppress
from pathlib import Path

from contracts import ErrorCode
from execution_system.custody._tree import Refusal, Tree

#: Capabilities whose issue time this process remembers.
_ISSUED_MEMORY = 4096
#: File timestamps are taken from the kernel's coarse clock; compare with the same one
#: (CLOCK_REALTIME_COARSE is 5 on Linux; the time module does not name it before 3.13).
_COARSE = getattr(time, "CLOCK_REALTIME_COARSE", 5 if sys.platform == "linux" else None)


class IssueTimes:
    """nonce -> the coarse real time its capability was issued (this process only)."""

    def __init__(self) -> None:
        self._issued_ns: dict[str, int] = {}

    def remember(self, nonce: str) -> None:
        """Note that the capability with ``nonce`` is being issued now."""
        if len(self._issued_ns) >= _ISSUED_MEMORY:
            self._issued_ns.pop(next(iter(self._issued_ns)))
        # The clock file timestamps come from (coarse), not the injectable one: a change
        # whose ctime precedes this instant did not come from the turn being issued.
        if _COARSE is not None:
            self._issued_ns[nonce] = time.clock_gettime_ns(_COARSE)

    def check(self, workspace: Path, nonce: str, changed: list[str], tree: Tree) -> None:
        """Refuse changes that predate the capability (only where this process issued it)."""
        issued = self._issued_ns.pop(nonce, None)
        if issued is None or not changed:
            return
        late = []
        for path in changed:
            if path not in tree:
                continue  # a deletion leaves no timestamp to attribute
            with suppress(OSError):
                if os.lstat(workspace / path).st_ctime_ns < issued:
                    late.append(path)
        if late:
            raise Refusal(
                ErrorCode.CUSTODY_UNATTRIBUTED_WRITE,
                late[0],
                f"{len(late)} path(s) changed before this turn's capability was issued "
                "(a write from outside the turn)",
            )
