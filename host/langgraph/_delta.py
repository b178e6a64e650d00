"""Checkpoints stored as deltas of their parent, so a long delivery's store grows linearly.

LangGraph hands the saver the whole checkpoint at every step. Its per-node
maps (the thread's ``visits``/``activations``/``outputs`` channels, and
LangGraph's own ``channel_versions`` and ``versions_seen``, which hold an entry
per node) grow with every node a delivery passes, so storing each checkpoint
whole makes a chain of N nodes cost O(N^2) bytes.

Here a checkpoint whose parent this process wrote (or read) is stored as the
difference from that parent: for each map, the keys set and the keys removed;
for a dict-valued channel, the same one level down; anything else whole. A full
copy is written instead whenever the delta bytes written since the last full
copy would exceed that copy's size, or after :data:`MAX_DEPTH` deltas. So the
stored bytes stay under three times the sum of the deltas (each full copy is
paid for by at least as many delta bytes), and reading any checkpoint replays
at most a full copy's worth of deltas.

A stored delta is ``{"t": thread, "n": namespace, "p": parent id, "d": delta}``
serialized by the saver's own serializer, under the type ``execsys-delta/<type>``.
Rows are never rewritten, and only retirement deletes a thread's rows (all of
them), so a delta's parent is always there to read.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import Checkpoint

from contracts import ErrorCode, error

PREFIX = "execsys-delta/"
#: Deltas in a row before a full copy is written, whatever their size.
MAX_DEPTH = 512
_MAPS = ("channel_versions", "versions_seen")
_MISSING = object()

Fetch = Callable[[str, str, str], tuple[str, bytes] | None]
"""(thread, namespace, checkpoint id) -> the stored (type, blob), or None."""


def private_copy(checkpoint: Checkpoint) -> Checkpoint:
    """A copy no later change by LangGraph can reach (dict channels copied one level)."""
    copied: dict[str, Any] = dict(checkpoint)
    copied["channel_values"] = {
        k: dict(v) if type(v) is dict else v
        for k, v in (checkpoint.get("channel_values") or {}).items()
    }
    if "channel_versions" in checkpoint:
        copied["channel_versions"] = dict(checkpoint["channel_versions"])
    if "versions_seen" in checkpoint:
        copied["versions_seen"] = {k: dict(v) for k, v in checkpoint["versions_seen"].items()}
    return copied  # type: ignore[return-value]


def _diff_map(old: dict[str, Any], new: dict[str, Any]) -> list[Any]:
    changed = {k: v for k, v in new.items() if (o := old.get(k, _MISSING)) is not v and o != v}
    return [changed, sorted(old.keys() - new.keys())]


def _apply_map(base: dict[str, Any], delta: list[Any]) -> dict[str, Any]:
    changed, gone = delta
    result = dict(base)
    result.update(changed)
    for key in gone:
        result.pop(key, None)
    return result


def diff(parent: Checkpoint, child: Checkpoint) -> dict[str, Any]:
    """What turns ``parent`` into ``child``."""
    old_values, new_values = parent["channel_values"], child["channel_values"]
    values: dict[str, Any] = {}
    for channel, value in new_values.items():
        before = old_values.get(channel, _MISSING)
        if before is value:
            continue
        if type(before) is dict and type(value) is dict:
            nested = _diff_map(before, value)
            if nested[0] or nested[1]:
                values[channel] = ["m", nested]
        elif before is _MISSING or before != value:
            values[channel] = ["v", value]
    delta: dict[str, Any] = {
        "top": {k: v for k, v in child.items() if k not in {"channel_values", *_MAPS}},
        "values": [values, sorted(old_values.keys() - new_values.keys())],
    }
    for key in _MAPS:
        delta[key] = _diff_map(parent.get(key) or {}, child.get(key) or {})  # type: ignore[arg-type]
    return delta


def apply(parent: Checkpoint, delta: dict[str, Any]) -> Checkpoint:
    """``parent`` with ``delta`` applied: a new checkpoint, ``parent`` untouched."""
    values = dict(parent["channel_values"])
    changed, gone = delta["values"]
    for channel, (how, value) in changed.items():
        values[channel] = _apply_map(values.get(channel) or {}, value) if how == "m" else value
    for channel in gone:
        values.pop(channel, None)
    child: dict[str, Any] = dict(delta["top"])
    child["channel_values"] = values
    for key in _MAPS:
        child[key] = _apply_map(parent.get(key) or {}, delta[key])  # type: ignore[arg-type]
    return child  # type: ignore[return-value]


@dataclass
class _Last:
    id: str
    checkpoint: Checkpoint
    since_full: int
    full_size: int
    depth: int


class DeltaCodec:
    """Encodes checkpoints for storage (delta or full) and decodes them back."""

    def __init__(self, serde: Any, fetch: Fetch, *, threads: int = 64) -> None:
        self.serde = serde
        self.fetch = fetch
        self._last: OrderedDict[tuple[str, str], _Last] = OrderedDict()
        self._threads = threads

    def encode(
        self, thread: str, ns: str, parent_id: str | None, checkpoint: Checkpoint
    ) -> tuple[str, bytes, _Last]:
        """(type, blob) to store, and what :meth:`wrote` records once it is committed."""
        kept = private_copy(checkpoint)
        last = self._last.get((thread, ns))
        if last is not None and parent_id is not None and last.id == parent_id:
            payload = {"t": thread, "n": ns, "p": parent_id, "d": diff(last.checkpoint, kept)}
            type_, blob = self.serde.dumps_typed(payload)
            since = last.since_full + len(blob)
            if since <= last.full_size and last.depth < MAX_DEPTH:
                return (
                    PREFIX + type_,
                    blob,
                    _Last(kept["id"], kept, since, last.full_size, last.depth + 1),
                )
        type_, blob = self.serde.dumps_typed(checkpoint)
        return type_, blob, _Last(kept["id"], kept, 0, len(blob), 0)

    def wrote(self, thread: str, ns: str, last: _Last) -> None:
        """Remember a committed checkpoint as the parent of the thread's next one."""
        self._last[(thread, ns)] = last
        self._last.move_to_end((thread, ns))
        while len(self._last) > self._threads:
            self._last.popitem(last=False)

    def decode(self, type_: str, blob: bytes) -> Checkpoint:
        """The whole checkpoint a stored (type, blob) stands for."""
        chain: list[dict[str, Any]] = []
        while type_.startswith(PREFIX):
            payload = self.serde.loads_typed((type_[len(PREFIX) :], blob))
            last = self._last.get((payload["t"], payload["n"]))
            if last is not None and last.id == payload["d"]["top"]["id"] and not chain:
                return private_copy(last.checkpoint)  # the one this process just wrote
            chain.append(payload["d"])
            if last is not None and last.id == payload["p"]:
                checkpoint = private_copy(last.checkpoint)
                break
            found = self.fetch(payload["t"], payload["n"], payload["p"])
            if found is None or len(chain) > MAX_DEPTH + 1:
                raise error(
                    ErrorCode.STORE_UNREADABLE,
                    "a stored checkpoint delta's parent is missing",
                    path=str(payload["p"]),
                    expected="every checkpoint of a thread, or none (retired)",
                )
            type_, blob = found
        else:
            checkpoint = self.serde.loads_typed((type_, blob))
        for delta in reversed(chain):
            checkpoint = apply(checkpoint, delta)
        return checkpoint


class DeltaSerde:
    """The saver's serializer, decoding stored deltas into whole checkpoints."""

    def __init__(self, inner: Any, codec: DeltaCodec) -> None:
        self.inner = inner
        self.codec = codec

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """As the wrapped serializer."""
        result: tuple[str, bytes] = self.inner.dumps_typed(obj)
        return result

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """As the wrapped serializer, plus whole checkpoints from stored deltas."""
        if data[0].startswith(PREFIX):
            return self.codec.decode(*data)
        return self.inner.loads_typed(data)
