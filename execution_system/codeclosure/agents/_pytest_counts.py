"""A pytest plugin that records what a check ran; copied beside the check, never imported here.

It is loaded into the project's own pytest (``-p execsys_counts_<random>`` in
``PYTEST_ADDOPTS``), so it imports nothing: pytest finds hooks by name. The
counts go to the JSON file named by ``EXECSYS_TEST_COUNTS``:

* ``collected``: items collected, before any ``conftest.py`` or option
  deselected one (``pytest_itemcollected`` runs before
  ``pytest_collection_modifyitems``);
* ``selected``: items left to run; ``deselected`` = collected - selected,
  whether deselected openly or dropped silently;
* ``errors``: collection errors; ``passed``, ``failed``, ``skipped``: outcomes.
"""

from __future__ import annotations

import json
import os
from typing import Any

_COUNTS = {"collected": 0, "selected": 0, "deselected": 0, "errors": 0}
_OUTCOMES = {"passed": 0, "failed": 0, "skipped": 0}


def pytest_itemcollected(item: Any) -> None:
    """Count every collected item."""
    _COUNTS["collected"] += 1


def pytest_collectreport(report: Any) -> None:
    """Count collection errors."""
    if report.failed:
        _COUNTS["errors"] += 1


def pytest_collection_finish(session: Any) -> None:
    """What is left to run once every hook had its say."""
    _COUNTS["selected"] = len(session.items)
    _COUNTS["deselected"] = max(0, _COUNTS["collected"] - _COUNTS["selected"])


def pytest_runtest_logreport(report: Any) -> None:
    """Count outcomes (a failure in setup or teardown counts as failed)."""
    if report.failed:
        _OUTCOMES["failed"] += 1
    elif report.skipped:
        _OUTCOMES["skipped"] += 1
    elif report.when == "call" and report.passed:
        _OUTCOMES["passed"] += 1


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    """Write the counts."""
    target = os.environ.get("EXECSYS_TEST_COUNTS")
    if target:
        with open(target, "w", encoding="utf-8") as handle:
            json.dump({**_COUNTS, **_OUTCOMES, "exit": int(exitstatus)}, handle)
