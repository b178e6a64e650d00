"""PostgreSQL for the tests: one fresh database per test, on the server EXECSYS_TEST_POSTGRES names.

``EXECSYS_TEST_POSTGRES`` is a URL to a database the tests may connect to and
use to create (and drop) databases, e.g. ``postgresql://root@localhost:5432/execsys_test``
(see the README). Unset, every test here is skipped.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from host.storage.postgres import PostgresStorage

SERVER = os.environ.get("EXECSYS_TEST_POSTGRES", "")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.postgres)
            if not SERVER:
                item.add_marker(pytest.mark.skip(reason="EXECSYS_TEST_POSTGRES is not set"))


def database_url(name: str) -> str:
    """The server's URL with another database name."""
    parts = urlsplit(SERVER)
    return urlunsplit(parts._replace(path=f"/{name}"))


def admin(sql: str) -> None:
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(sql.encode())


_CREATED: set[str] = set()
"""Databases made and not dropped yet (dropped when the test process exits)."""


def create_database() -> str:
    """A new, empty database on the test server; its URL."""
    name = f"execsys_t_{uuid.uuid4().hex[:12]}"
    admin(f'CREATE DATABASE "{name}" TEMPLATE template0')
    _CREATED.add(name)
    return database_url(name)


def drop_database(url: str) -> None:
    """Drop a database :func:`create_database` made.

    ``WITH (FORCE)`` may not terminate a server process the test role does not own
    (an autovacuum worker busy on the database just used): such a refusal is
    retried for a few seconds, and a database still busy after that is left to
    the drop at exit.
    """
    name = urlsplit(url).path.strip("/")
    for _ in range(20):
        try:
            admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except psycopg.errors.InsufficientPrivilege:
            time.sleep(0.25)
            continue
        _CREATED.discard(name)
        return


@atexit.register
def _drop_leftovers() -> None:
    for name in sorted(_CREATED):
        with contextlib.suppress(psycopg.Error):
            admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A new, empty database for this test; dropped afterwards."""
    url = create_database()
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStorage]:
    """The Host's PostgreSQL storage on this test's database, schema set up."""
    opened = PostgresStorage.open(pg_url)
    opened.setup()
    try:
        yield opened
    finally:
        opened.close()
