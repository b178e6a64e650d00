"""Fixtures of the storage conformance suite: every test runs once per backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from host.storage import Storage
from tests.storage.backends import Backend, params


@pytest.fixture(params=params())
def backend(request: pytest.FixtureRequest) -> Backend:
    """One backend of :data:`tests.storage.backends.BACKENDS`."""
    chosen: Backend = request.param
    return chosen


@pytest.fixture
def location(backend: Backend, tmp_path: Path) -> Iterator[str]:
    """A fresh, set-up database of the backend (dropped afterwards where it is a server's)."""
    created = backend.create(tmp_path)
    yield created
    if backend.drop is not None:
        backend.drop(created)


@pytest.fixture
def connect(backend: Backend, location: str) -> Iterator[Callable[[], Storage]]:
    """Open further handles on the test's database; all are closed afterwards."""
    opened: list[Storage] = []

    def open_one() -> Storage:
        storage = backend.open(location)
        opened.append(storage)
        return storage

    yield open_one
    for storage in opened:
        storage.close()


@pytest.fixture
def storage(connect: Callable[[], Storage]) -> Storage:
    """The test's first handle."""
    return connect()
