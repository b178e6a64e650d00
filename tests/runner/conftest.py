from __future__ import annotations

import gc
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _collect_leaks() -> Iterator[None]:
    # An unclosed transport or pipe warns from __del__; collect here so the
    # ResourceWarning (an error under filterwarnings) lands on the test that leaked.
    yield
    gc.collect()


@pytest.fixture(autouse=True)
def _restore_import_state() -> Iterator[None]:
    # Python executors put their folder on sys.path and import modules; undo it.
    path = list(sys.path)
    modules = set(sys.modules)
    yield
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        if name.startswith("execsys_"):
            del sys.modules[name]
