"""Pruning a delivery's archived savepoints keeps the head, what was asked, and shared contents.

``goal export`` of a closed goal prunes the shared archive as it prunes the
local copy: the rejected generations' manifests go, and with them every
content no remaining savepoint of any delivery names.
"""

from __future__ import annotations

from host.storage import ArchivedSavepoint
from host.storage.postgres import PostgresStorage


def _put(store: PostgresStorage, delivery: str, savepoint: str, contents: dict[str, bytes]) -> None:
    assert store.archive is not None
    entry = ArchivedSavepoint(savepoint, b"{}", savepoint.encode(), len(contents), 0, 0.0)
    with store.transaction() as tx:
        assert store.archive.put(tx, delivery, savepoint, entry, list(contents), contents) == []


def _state(store: PostgresStorage, delivery: str) -> tuple[list[str], set[str]]:
    assert store.archive is not None
    blobs = store.archive.blobs(["x", "y", "z", "w"])
    return [s.savepoint for s in store.archive.savepoints(delivery)], set(blobs)


def test_pruning_keeps_the_head_the_kept_and_what_others_name(store: PostgresStorage) -> None:
    assert store.archive is not None
    _put(store, "A", "s1", {"x": b"x", "y": b"y", "w": b"w"})  # the base
    _put(store, "A", "s2", {"x": b"x", "z": b"z"})  # a rejected generation
    _put(store, "A", "s3", {"x": b"x", "z": b"z"})  # the accepted one: the head
    _put(store, "B", "t1", {"y": b"y"})  # another delivery shares y
    assert _state(store, "A") == (["s1", "s2", "s3"], {"x", "y", "z", "w"})

    with store.transaction() as tx:  # keep the base; the head is kept anyway
        assert store.archive.prune(tx, "A", ["s1"], ["x", "y", "w", "z"]) == 1
    assert _state(store, "A") == (["s1", "s3"], {"x", "y", "z", "w"})

    with store.transaction() as tx:  # now only the head: w was the base's alone
        assert store.archive.prune(tx, "A", [], ["x", "z"]) == 1
    assert _state(store, "A") == (["s3"], {"x", "y", "z"}), "y stays: B names it"
    assert store.archive.head("A") == "s3"
    assert _state(store, "B") == (["t1"], {"x", "y", "z"})
