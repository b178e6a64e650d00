"""Fixtures: the sample project in tmp_path, an event loop, a GoalRuntime on its store."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from execution_system.codeclosure import GoalRuntime
from tests.codeclosure.helpers import Sample, make_sample, snapshot

T = TypeVar("T")


@pytest.fixture
def sample(tmp_path: Path) -> Iterator[Sample]:
    made = make_sample(tmp_path)
    before = snapshot(made.project)
    yield made
    # Protected verification: no run ever edits the project folder itself.
    assert snapshot(made.project) == before, "the project folder was modified"


@pytest.fixture
def aio() -> Iterator[Any]:
    """Run a coroutine on one event loop kept for the whole test."""
    loop = asyncio.new_event_loop()

    def run(coro: Coroutine[Any, Any, T]) -> T:
        return loop.run_until_complete(coro)

    yield run
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()
    gc.collect()


@pytest.fixture
def runtime(sample: Sample, aio: Any) -> Iterator[GoalRuntime]:
    made = GoalRuntime(sample.store)
    yield made
    made.close()
