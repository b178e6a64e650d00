"""Opening an SQLite store for a Host: refuse what cannot work, create the tables."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from host.storage.sqlite._errors import refuse_unusable, store_error
from host.storage.sqlite._storage import SqliteStorage


def open_store(path: Path, *, read_only: bool) -> SqliteStorage:
    """The store at ``path`` with the Host's tables (created unless ``read_only``).

    Every SQLite failure becomes one catalogued error (``store_error``).
    """
    refuse_unusable(path, read_only=read_only)
    try:
        storage = SqliteStorage.open(path, readonly=read_only)
        if not read_only:
            storage.setup()
    except sqlite3.DatabaseError as exc:
        raise store_error(exc, path) from None
    return storage
