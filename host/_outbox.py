"""Outbox items: what a step hands to its checkpoint's transaction, told apart by ``type``.

A step cannot write the store itself (its writes become visible only with its
checkpoint), so it queues items in the ``outbox`` channel: content-addressed
records, journal transition drafts, and invalidation batches. They stay plain
JSON-shaped dicts (channel values must be JSON-native); these TypedDicts are
their one definition, and :data:`OutboxKind` the closed set of their kinds.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

OutboxKind = Literal["record", "event", "invalidate"]
"""The closed set of outbox item kinds."""


class RecordItem(TypedDict):
    """A content-addressed value to store (once per digest)."""

    type: Literal["record"]
    digest: str
    value: Any


class EventItem(TypedDict):
    """A journal transition draft, chained onto the head at commit."""

    type: Literal["event"]
    request: str
    node: str
    activation: int
    transition: str
    prior: str
    result: str
    attempt: int | None
    refs: list[dict[str, str]]
    predecessors: list[list[Any]]
    error: dict[str, str] | None
    approvals: list[dict[str, Any]]
    actor: dict[str, str]
    authorization: dict[str, str] | None
    rationale: str


class InvalidateItem(TypedDict):
    """A journal invalidation batch (an activation and its descendant closure)."""

    type: Literal["invalidate"]
    request: str
    targets: list[list[Any]]
    source: dict[str, str]
    policy: str
    actor: dict[str, str]
    rationale: str


OutboxItem = RecordItem | EventItem | InvalidateItem
"""One item of a step's outbox."""
