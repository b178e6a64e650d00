"""Fixtures for the custody tests: a real FileCustody on tmp_path and a settable clock."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from custody_helpers import DELIVERY, Clock

from execution_system.custody import FileCustody


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    root = tmp_path / "seed"
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "README.md").write_text("hello\n")
    (root / "src" / "app.py").write_text("print('app')\n")
    (root / "src" / "run.sh").write_text("#!/bin/sh\n")
    (root / "src" / "run.sh").chmod(0o755)
    (root / "docs" / "guide.md").write_text("guide\n")
    (root / "src" / "readme-link").symlink_to("../README.md")
    return root


@pytest.fixture
def custody(tmp_path: Path, clock: Clock) -> FileCustody:
    return FileCustody(tmp_path / "custody", clock=clock)


@pytest.fixture
def opened(custody: FileCustody, seed: Path) -> Callable[[], Path]:
    """Open DELIVERY from the seed; return a function giving its workspace path."""
    custody.open(DELIVERY, seed=str(seed))
    return lambda: Path(custody.workspace(DELIVERY))
