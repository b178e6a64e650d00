"""Start-up consistency between custody's head and the host's checkpoint.

The commit protocol advances custody's head *before* the checkpoint commits,
so a crash between the two leaves custody one savepoint ahead. Neither record
substitutes for the other: the host shows the mismatch and an operator
resolves it by directive (continue, restart-from-savepoint, intervene).
"""

from __future__ import annotations

from contracts import SavepointId


def compare_heads(
    custody_head: SavepointId | None, checkpoint_savepoint: SavepointId | None
) -> str | None:
    """Describe how custody's durable head and the checkpoint's savepoint disagree.

    Returns None when they agree. ``custody_head`` is None when custody has no
    head for the delivery (never opened, or retired); ``checkpoint_savepoint``
    is None when the checkpoint records none yet.
    """
    if custody_head == checkpoint_savepoint:
        return None
    if custody_head is None:
        return (
            f"custody has no head (workspace never opened or retired), "
            f"but the checkpoint records savepoint {checkpoint_savepoint}"
        )
    if checkpoint_savepoint is None:
        return f"custody head is {custody_head}, but the checkpoint records no savepoint"
    return (
        f"custody head {custody_head} differs from the checkpoint's savepoint "
        f"{checkpoint_savepoint}: one moved without the other (a crash between custody "
        f"advance/restore and the checkpoint commit); resolve by directive"
    )
