"""The LangGraph state of a delivery thread: small, JSON-native, bounded.

Every channel except ``outbox`` is a dict merged key by key (a ``None`` value
deletes the key), so parallel branches writing in the same super-step never
collide, and nothing grows with the number of steps: outputs are stored once,
content-addressed, in the records table and referenced here by digest.

``outbox`` is cleared after every step. It carries what a step produced for
the store (journal event drafts, records, status); the saver writes it in the
same transaction as the checkpoint that embodies it.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langgraph.channels.topic import Topic


def merge(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Merge ``right`` into ``left`` key by key; ``None`` values delete keys."""
    result = dict(left or {})
    for key, value in (right or {}).items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


Merged = Annotated[dict[str, Any], merge]


class ThreadState(TypedDict, total=False):
    """Channels of one delivery thread."""

    run: Merged
    """status, outcome, message, code, started, stop_requested."""
    visits: Merged
    """node -> visits so far (what max_visits bounds; rewinds on restart-from-savepoint)."""
    activations: Merged
    """node -> the last journal activation number issued (never rewinds)."""
    pending: Merged
    """node -> the activation scheduled to run next (site, predecessors, turn, response)."""
    outputs: Merged
    """node -> {activation, step, digest} of its last committed outputs this round."""
    regions: Merged
    """parallel node -> {round, selected, fired, activation}."""
    marks: Merged
    """'parallel/branch' -> the round in which that branch reached the barrier."""
    suspensions: Merged
    """node -> the pending action-input of that node."""
    waits: Merged
    """wait node -> {activation, kind, approvals, needed, roles, result}."""
    correlations: Merged
    """correlation id -> pending | answered | stale (refuses reuse of old answers)."""
    halted: Merged
    """node -> {status, code, message}: an activation blocked until a directive."""
    scheduled: Merged
    """One-node layout only: node -> 1 for the node the previous step scheduled."""
    wake: Merged
    """Input only: node -> what to hand the node when the thread is resumed."""
    savepoint: Merged
    """{"head": custody savepoint this checkpoint embodies}."""
    outbox: Annotated[list[dict[str, Any]], Topic(dict, accumulate=False)]
    """Cleared each step: journal drafts and records for the saver."""
