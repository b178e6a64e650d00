"""Checkpoints stored as deltas: exact round trips, bounded full copies, linear size.

Ground truth is what LangGraph handed the saver: every checkpoint written is
recorded as it was passed in, and every stored row must decode to exactly that,
both in the writing process and in a fresh saver that never saw it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts import ErrorCode, ExecsysError
from host.langgraph import _delta as delta_module
from host.langgraph._delta import PREFIX, DeltaCodec, apply, diff, private_copy
from tests.host.harness import graph_doc, make_delivery, reply

keys = st.text("abcdef", min_size=1, max_size=3)
leaves = st.one_of(
    st.integers(), st.text(max_size=4), st.none(), st.lists(st.integers(), max_size=3)
)
channel_values = st.dictionaries(
    keys, st.one_of(leaves, st.dictionaries(keys, leaves, max_size=5)), max_size=6
)
versions = st.dictionaries(keys, st.integers(), max_size=6)
checkpoints = st.fixed_dictionaries(
    {
        "v": st.just(4),
        "id": st.text("0123456789", min_size=1, max_size=4),
        "ts": st.text(max_size=3),
        "channel_values": channel_values,
        "channel_versions": versions,
        "versions_seen": st.dictionaries(keys, versions, max_size=4),
        "updated_channels": st.one_of(st.none(), st.lists(keys, max_size=3)),
    }
)


@given(checkpoints, checkpoints)
def test_applying_the_diff_gives_the_child_and_leaves_the_parent(parent, child):
    before = private_copy(parent)
    assert apply(parent, diff(parent, child)) == child
    assert parent == before


@given(
    checkpoints,
    checkpoints,
    st.lists(keys, max_size=4),
    st.dictionaries(keys, st.sets(keys, max_size=4), max_size=4),
)
def test_hints_never_change_the_diff_s_effect(parent, child, moved, written):
    # Any hint, right, partial or wrong, gives a diff that turns parent into child.
    new_versions = {k: 1 for k in moved}
    assert apply(parent, diff(parent, child, new_versions, written)) == child


def test_a_hinted_diff_of_a_partial_hint_still_finds_every_change():
    parent: Any = {
        "v": 4,
        "id": "1",
        "ts": "",
        "channel_values": {"visits": {"a": 1, "b": 1, "c": 1}},
        "channel_versions": {"visits": 1, "branch:to:a": 1},
        "versions_seen": {"a": {"branch:to:a": 1}},
    }
    child: Any = {
        "v": 4,
        "id": "2",
        "ts": "",
        "channel_values": {"visits": {"a": 2, "b": 5}},
        "channel_versions": {"visits": 2, "branch:to:a": 2},
        "versions_seen": {"a": {"branch:to:a": 2}, "b": {"branch:to:b": 1}},
    }
    # The hints name 'a' only: 'b' changed and 'c' went without a write the saver saw.
    delta = diff(parent, child, {"visits": 2}, {"visits": {"a"}})
    assert apply(parent, delta) == child
    assert delta["values"][0]["visits"][1] == [{"a": 2, "b": 5}, ["c"]]
    assert delta["channel_versions"] == [{"visits": 2, "branch:to:a": 2}, []]


def _chain(n: int) -> dict[str, Any]:
    nodes: dict[str, Any] = {}
    for i in range(n):
        nodes[f"s{i:03d}"] = {
            "kind": "action",
            "executor": "step",
            "outputs": {"ok": {"type": "boolean"}},
            "next": f"s{i + 1:03d}" if i < n - 1 else "end",
        }
    nodes["end"] = {"kind": "terminal", "outcome": "succeeded"}
    return graph_doc(nodes, "s000")


async def _ok(_request: Any) -> dict[str, Any]:
    return reply({"ok": True})


def _rows(db: Path, thread: str) -> list[tuple[str, str, bytes]]:
    with sqlite3.connect(db) as conn:
        return [
            (str(i), str(t), bytes(b))
            for i, t, b in conn.execute(
                "SELECT checkpoint_id, type, checkpoint FROM checkpoints "
                "WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id",
                (thread,),
            )
        ]


def recorded(codec: DeltaCodec) -> dict[str, Any]:
    """Every checkpoint ``codec`` encodes from now on, by id, as LangGraph handed it over."""
    written: dict[str, Any] = {}
    encode = codec.encode

    def recording(thread: str, ns: str, parent: str | None, checkpoint: Any, *rest: Any) -> Any:
        written[checkpoint["id"]] = private_copy(checkpoint)
        return encode(thread, ns, parent, checkpoint, *rest)

    codec.encode = recording  # type: ignore[method-assign]
    return written


def test_a_long_chain_stores_deltas_that_decode_exactly(harness, tmp_path):
    h = harness({"step": _ok})
    saver = h.host.substrate.saver
    written = recorded(saver.codec)
    delivery = make_delivery(_chain(120))
    assert h.run(delivery).status.value == "completed"
    rows = _rows(tmp_path / "state.db", delivery.delivery_id)
    deltas = [r for r in rows if r[1].startswith(PREFIX)]
    assert len(rows) == len(written) > 120
    # Most rows are deltas; full copies are what keeps replays short.
    assert 0 < len(rows) - len(deltas) < len(rows) // 2
    cold = DeltaCodec(saver.codec.serde, saver.store.stored_checkpoint)
    with saver.lock:
        for checkpoint_id, type_, blob in rows:
            assert cold.decode(type_, blob) == written[checkpoint_id]
            assert saver.serde.loads_typed((type_, blob)) == written[checkpoint_id]
    # Bytes stay linear: the deltas outweigh the full copies they pay for.
    full = sum(len(r[2]) for r in rows if not r[1].startswith(PREFIX))
    assert full <= 2 * sum(len(r[2]) for r in deltas) + len(rows[0][2])


def asking_chain() -> tuple[dict[str, Any], Any]:
    """A 30-node chain whose 16th node asks once, and that node's executor."""

    async def ask_once(request: Any) -> dict[str, Any]:
        if request.turn == 1:
            return {"status": "needs-input", "question": {"q": "go?"}, "session": "s"}
        return reply({"ok": True})

    nodes = _chain(30)["nodes"]
    nodes["s015"]["executor"] = "ask"
    return graph_doc(nodes, "s000"), ask_once


def test_a_fresh_host_reads_and_continues_a_delta_stored_thread(harness):
    doc, ask_once = asking_chain()
    first = harness({"step": _ok, "ask": ask_once})
    delivery = make_delivery(doc)
    suspended = first.run(delivery)
    assert suspended.status.value == "suspended"
    first.close()
    second = harness({"step": _ok, "ask": ask_once}, custody=first.custody)
    report = second.host.status(delivery.delivery_id)
    assert report.status.value == "suspended"
    assert report.suspension is not None
    correlation = report.suspension.correlation
    done = asyncio.run(second.host.answer(delivery.delivery_id, correlation, {"go": True}))
    assert done.status.value == "completed"


def test_a_missing_parent_is_a_coded_error(harness, tmp_path):
    h = harness({"step": _ok})
    delivery = make_delivery(_chain(20))
    h.run(delivery)
    saver = h.host.substrate.saver
    rows = _rows(tmp_path / "state.db", delivery.delivery_id)
    last = next(r for r in reversed(rows) if r[1].startswith(PREFIX))
    with sqlite3.connect(tmp_path / "state.db") as conn:
        conn.execute(
            "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id != ?",
            (delivery.delivery_id, last[0]),
        )
    cold = DeltaCodec(saver.codec.serde, saver.store.stored_checkpoint)
    with saver.lock, pytest.raises(ExecsysError) as caught:
        cold.decode(last[1], last[2])
    assert caught.value.code is ErrorCode.STORE_UNREADABLE


def test_a_chain_step_encodes_without_walking_the_per_node_maps(harness, monkeypatch):
    # What a step changed is named by put's new_versions and the step's writes, so
    # encoding a late step costs what an early one does: no map is walked whole.
    walks: list[int] = []
    walk = delta_module._diff_map

    def counting(old: dict[str, Any], new: dict[str, Any]) -> list[Any]:
        walks.append(len(new))
        return walk(old, new)

    monkeypatch.setattr(delta_module, "_diff_map", counting)
    h = harness({"step": _ok})
    assert h.run(make_delivery(_chain(80))).status.value == "completed"
    assert [n for n in walks if n > 10] == []
