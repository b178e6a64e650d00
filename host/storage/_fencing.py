"""The error a write under a stale lease token ends with, shared by the core and the backends."""

from __future__ import annotations

from typing import Any

from contracts import ErrorCode, ExecsysError, error


def fenced(delivery: str, found: Any) -> ExecsysError:
    """The error of a write whose holder no longer owns the delivery."""
    return error(
        ErrorCode.LEASE_FENCED,
        "this runner lost the delivery's lease to another holder; nothing more of it is written",
        path=delivery,
        expected=f"the current lease (fencing token {found if found is not None else '?'})",
    )
