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

Encoding costs what changed, not what the checkpoint holds, so a step late in
a long chain costs what an early one does. The codec keeps the checkpoint it
was handed (top-level maps copied, their values shared: LangGraph hands the
saver a checkpoint it no longer touches, since saves run in the background,
and its reducers replace channel values rather than change them), so an
unchanged channel is the very object its parent held and is skipped by
identity. Which keys of a changed map to look at is guessed: for a
dict-valued channel, the keys the step's writes named (the saver sees them in
``put_writes`` before the ``put`` of their checkpoint); for LangGraph's two
per-node maps, the channels ``put``'s ``new_versions`` names and, through
their trigger channels, the nodes whose ``versions_seen`` entry can have
moved. Each guess is checked against the whole map by one C-level comparison,
and a wrong one falls back to walking the map, so a guess can cost time but
never change what is stored.

A stored delta is ``{"t": thread, "n": namespace, "p": parent id, "d": delta}``
serialized by the saver's own serializer, under the type ``execsys-delta/<type>``.
Rows are never rewritten, and only retirement deletes a thread's rows (all of
them), so a delta's parent is always there to read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import Checkpoint

from contracts import ErrorCode, error

PREFIX = "execsys-delta/"
#: Deltas in a row before a full copy is written, whatever their size.
MAX_DEPTH = 512
_MAPS = ("channel_versions", "versions_seen")
_MISSING = object()
#: How LangGraph names the channel that schedules a node (``branch:to:<node>``), and the
#: ``versions_seen`` entry of the graph's input.
_TRIGGER = "branch:to:"
_INPUT = "__input__"

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


def kept_copy(checkpoint: Checkpoint) -> Checkpoint:
    """What the codec keeps of a checkpoint it encoded: the top-level maps copied, values shared.

    Costs three C-level map copies, where :func:`private_copy` allocates a dict
    per node. Sharing the values is what lets :func:`diff` skip an unchanged
    channel by identity.
    """
    kept: dict[str, Any] = dict(checkpoint)
    kept["channel_values"] = dict(checkpoint.get("channel_values") or {})
    for key in _MAPS:
        if key in checkpoint:
            kept[key] = dict(checkpoint[key])  # type: ignore[literal-required]
    return kept  # type: ignore[return-value]


def _diff_map(old: dict[str, Any], new: dict[str, Any]) -> list[Any]:
    changed = {k: v for k, v in new.items() if (o := old.get(k, _MISSING)) is not v and o != v}
    return [changed, sorted(old.keys() - new.keys())]


def _diff_hinted(old: dict[str, Any], new: dict[str, Any], hint: Iterable[str]) -> list[Any]:
    """:func:`_diff_map`, looking only at the keys in ``hint`` when they are provably enough.

    ``{**old, **changed} == new`` holds exactly when applying ``[changed, []]``
    to ``old`` gives ``new``: no other key changed and none was removed. The
    check runs in C; a hint that misses a change costs the walk, nothing else.
    """
    changed: dict[str, Any] = {}
    gone: list[str] = []
    for key in hint:
        if key in new:
            changed[key] = new[key]
        elif key in old:
            gone.append(key)
    expected = {**old, **changed}
    for key in gone:
        del expected[key]
    if expected == new:
        return [changed, sorted(gone)]
    return _diff_map(old, new)


def _seen_hint(new_versions: Mapping[str, Any]) -> set[str]:
    """Nodes whose ``versions_seen`` entry may have moved: those whose trigger channel moved."""
    hint = {_INPUT, *new_versions}
    hint.update(k[len(_TRIGGER) :] for k in new_versions if k.startswith(_TRIGGER))
    return hint


def _apply_map(base: dict[str, Any], delta: list[Any]) -> dict[str, Any]:
    changed, gone = delta
    result = dict(base)
    result.update(changed)
    for key in gone:
        result.pop(key, None)
    return result


def diff(
    parent: Checkpoint,
    child: Checkpoint,
    new_versions: Mapping[str, Any] | None = None,
    written: Mapping[str, set[str]] | None = None,
) -> dict[str, Any]:
    """What turns ``parent`` into ``child``.

    ``new_versions`` (what LangGraph passes ``put``) and ``written`` (per
    dict-valued channel, the keys the step's writes named) only speed the maps
    up: applying the result to ``parent`` gives ``child`` with or without them.
    """
    old_values, new_values = parent["channel_values"], child["channel_values"]
    values: dict[str, Any] = {}
    for channel, value in new_values.items():
        before = old_values.get(channel, _MISSING)
        if before is value:
            continue
        if type(before) is dict and type(value) is dict:
            keys = (written or {}).get(channel)
            nested = _diff_map(before, value) if keys is None else _diff_hinted(before, value, keys)
            if nested[0] or nested[1]:
                values[channel] = ["m", nested]
        elif before is _MISSING or before != value:
            values[channel] = ["v", value]
    delta: dict[str, Any] = {
        "top": {k: v for k, v in child.items() if k not in {"channel_values", *_MAPS}},
        "values": [values, sorted(old_values.keys() - new_values.keys())],
    }
    old_versions: dict[str, Any] = parent.get("channel_versions") or {}
    versions: dict[str, Any] = child.get("channel_versions") or {}
    old_seen: dict[str, Any] = parent.get("versions_seen") or {}
    seen: dict[str, Any] = child.get("versions_seen") or {}
    if new_versions is None:
        delta["channel_versions"] = _diff_map(old_versions, versions)
        delta["versions_seen"] = _diff_map(old_seen, seen)
    else:
        delta["channel_versions"] = _diff_hinted(old_versions, versions, new_versions)
        delta["versions_seen"] = _diff_hinted(old_seen, seen, _seen_hint(new_versions))
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
    written: dict[str, set[str]] = field(default_factory=dict)
    """Per dict-valued channel, the keys named by writes made on top of this checkpoint."""


class DeltaCodec:
    """Encodes checkpoints for storage (delta or full) and decodes them back."""

    def __init__(self, serde: Any, fetch: Fetch, *, threads: int = 64) -> None:
        self.serde = serde
        self.fetch = fetch
        self._last: OrderedDict[tuple[str, str], _Last] = OrderedDict()
        self._threads = threads
        self._lock = threading.Lock()

    def encode(
        self,
        thread: str,
        ns: str,
        parent_id: str | None,
        checkpoint: Checkpoint,
        new_versions: Mapping[str, Any] | None = None,
    ) -> tuple[str, bytes, _Last]:
        """(type, blob) to store, and what :meth:`wrote` records once it is committed.

        ``new_versions`` is what LangGraph passed ``put`` (see :func:`diff`).
        """
        kept = kept_copy(checkpoint)
        last = self._last.get((thread, ns))
        if last is not None and parent_id is not None and last.id == parent_id:
            delta = diff(last.checkpoint, kept, new_versions, last.written)
            payload = {"t": thread, "n": ns, "p": parent_id, "d": delta}
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

    def saw_writes(
        self, thread: str, ns: str, parent_id: str | None, writes: Iterable[tuple[str, Any]]
    ) -> None:
        """Note the keys a task's writes name, on top of checkpoint ``parent_id``.

        A hint for :meth:`encode` of that checkpoint's child: a write missed here
        (or one LangGraph applies without showing it to the saver) costs the
        encoding a walk of the channel, never a wrong delta.
        """
        last = self._last.get((thread, ns))
        if last is None or last.id != parent_id:
            return
        for channel, value in writes:
            if type(value) is dict:
                last.written.setdefault(channel, set()).update(value)

    def wrote(self, thread: str, ns: str, last: _Last) -> None:
        """Remember a committed checkpoint as the parent of the thread's next one.

        Savers that commit several deliveries at once from worker threads call
        this concurrently; the lock keeps the bounded map consistent.
        """
        with self._lock:
            self._last[(thread, ns)] = last
            self._last.move_to_end((thread, ns))
            while len(self._last) > self._threads:
                self._last.popitem(last=False)

    def decode(self, type_: str, blob: bytes, fetch: Fetch | None = None) -> Checkpoint:
        """The whole checkpoint a stored (type, blob) stands for.

        ``fetch`` reads a parent's stored form for this one call instead of the
        codec's own (a store that reads a delta's whole chain at once).
        """
        fetch = fetch or self.fetch
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
            found = fetch(payload["t"], payload["n"], payload["p"])
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
