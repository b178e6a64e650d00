"""The storage backends the conformance suite runs on, one entry each.

A backend is added by one entry in :data:`BACKENDS` (and, if it needs a
server, a ``skip`` reason when none is reachable). Each entry says how to open
a handle on a fresh database, how a child process opens the same database,
how to write one of LangGraph's checkpoint rows inside a port transaction (the
checkpointer's job, which differs per backend), and which optional
capabilities it has.
"""

from __future__ import annotations

import os
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
    drop: Callable[[str], None] | None = None
    """Remove a database ``create`` made (None: the test's folder holds it)."""


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


def _postgres_create(tmp: Path) -> str:
    from host.langgraph._pg_saver import setup_checkpoint_tables
    from host.storage.postgres import PostgresStorage
    from tests.postgres.conftest import create_database

    location = create_database()
    storage = PostgresStorage.open(location, substrate_setup=setup_checkpoint_tables)
    storage.setup()
    storage.close()
    return location


def _postgres_open(location: str) -> Storage:
    from host.storage.postgres import PostgresStorage

    return PostgresStorage.open(location)


def _postgres_checkpoint(tx: StorageTx, thread: str, checkpoint: str) -> None:
    from host.storage.postgres import PostgresTx

    assert isinstance(tx, PostgresTx)
    row = {"v": 4, "id": checkpoint, "ts": ""}
    tx.put_checkpoint(thread, "", checkpoint, None, row, {}, ("json", b"{}"))


def _postgres_drop(location: str) -> None:
    from tests.postgres.conftest import drop_database

    drop_database(location)


POSTGRES = Backend(
    name="postgresql",
    create=_postgres_create,
    open=_postgres_open,
    child=textwrap.dedent(
        """
        from host.storage.postgres import PostgresStorage
        storage = PostgresStorage.open(LOCATION)
        """
    ),
    put_checkpoint=_postgres_checkpoint,
    skip=None if os.environ.get("EXECSYS_TEST_POSTGRES") else "EXECSYS_TEST_POSTGRES is not set",
    drop=_postgres_drop,
)

BACKENDS: dict[str, Backend] = {"sqlite": SQLITE, "postgresql": POSTGRES}
"""Every backend the suite runs on: add one entry per new implementation of the port."""


def params() -> list[Any]:
    """The ``backend`` fixture's params (skipped where a backend cannot run)."""
    import pytest

    return [
        pytest.param(b, id=b.name, marks=[pytest.mark.skip(reason=b.skip)] if b.skip else [])
        for b in BACKENDS.values()
    ]
