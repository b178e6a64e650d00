"""The storage backends the conformance suite runs on, one entry each.

A backend is added by one entry in :data:`BACKENDS` (and, if it needs a
server, a ``skip`` reason when none is reachable). Each entry says how to open
a handle on a fresh database, how a child process opens the same database,
how to write one of LangGraph's checkpoint rows inside a port transaction (the
checkpointer's job, which differs per backend), and which optional
capabilities it has.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from host.storage import Storage, StorageTx


class Capability(StrEnum):
    """What a backend may offer beyond the base contract."""

    FILE = "file"
    """The database is a file beside the data folder (embedded)."""


@dataclass(frozen=True)
class Backend:
    """How the suite drives one storage backend."""

    name: str
    """The pytest id."""
    create: Callable[[Path], str]
    """Make a fresh, set-up database for one test; return its location."""
    open: Callable[[str], Storage]
    """A new handle (its own connection) on the database at a location."""
    child: str
    """Python source a child process runs to bind ``storage`` for ``LOCATION``."""
    put_checkpoint: Callable[[StorageTx, str, str], None]
    """Write a root checkpoint row (thread, checkpoint id) inside a port transaction."""
    capabilities: frozenset[Capability] = field(default_factory=frozenset)
    """Optional capabilities."""
    skip: str | None = None
    """Why the backend cannot run here (None: it can)."""


def _sqlite_create(tmp: Path) -> str:
    from host.storage.sqlite import SqliteStorage

    location = str(tmp / "state.db")
    storage = SqliteStorage.open(Path(location))
    storage.setup()
    # LangGraph's own tables, created by its saver as the Host's checkpointer does.
    from langgraph.checkpoint.sqlite import SqliteSaver

    SqliteSaver(storage.conn).setup()
    storage.close()
    return location


def _sqlite_open(location: str) -> Storage:
    from host.storage.sqlite import SqliteStorage

    return SqliteStorage.open(Path(location))


def _sqlite_checkpoint(tx: StorageTx, thread: str, checkpoint: str) -> None:
    from host.storage.sqlite import SqliteTx

    assert isinstance(tx, SqliteTx)
    tx.put_checkpoint(thread, "", checkpoint, None, "json", b"{}", b"{}")


SQLITE = Backend(
    name="sqlite",
    create=_sqlite_create,
    open=_sqlite_open,
    child=textwrap.dedent(
        """
        from pathlib import Path
        from host.storage.sqlite import SqliteStorage
        storage = SqliteStorage.open(Path(LOCATION))
        """
    ),
    put_checkpoint=_sqlite_checkpoint,
    capabilities=frozenset({Capability.FILE}),
)

BACKENDS: dict[str, Backend] = {"sqlite": SQLITE}
"""Every backend the suite runs on: add one entry per new implementation of the port."""


def params() -> list[Any]:
    """The ``backend`` fixture's params (skipped where a backend cannot run)."""
    import pytest

    return [
        pytest.param(b, id=b.name, marks=[pytest.mark.skip(reason=b.skip)] if b.skip else [])
        for b in BACKENDS.values()
    ]
