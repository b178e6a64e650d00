"""SIGKILL a ``restart-from-savepoint`` while its re-run attempt is in flight.

The directive's run journals each re-run action attempt as started before any
executor is invoked, so a runner killed during the re-run leaves the attempt on
record: ``inspect`` names it interrupted, ``continue`` ends it as
``ATTEMPT_INTERRUPTED`` and starts the next attempt, and the delivery finishes
with every journal check passing.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.crash.test_crash_boundaries import (
    _check_interruptions,
    _cli,
    _delivery,
    _events,
    _phase,
    _prepare,
)


@pytest.mark.slow
def test_a_restart_killed_mid_rerun_leaves_the_attempt_on_record(tmp_path: Path) -> None:
    root = tmp_path / "restart"
    _prepare(root)
    assert _phase(root, "run").returncode == 0
    assert _phase(root, "input").returncode == 0  # waiting for approval, after edit wrote
    delivery = _delivery(root)
    view = json.loads(_cli(root, "inspect", delivery, "--json").stdout)
    seed = view["savepoints"][0]["savepoint"]  # before anything ran: plan runs again

    # The restart process commits three checkpoints (the fork and its run's input among
    # them) before plan's own step, the fourth: killed just before that one, the re-run
    # attempt has been invoked but never reached a checkpoint of its own.
    killed = _cli(
        root,
        "recover",
        delivery,
        "--directive",
        "restart-from-savepoint",
        "--savepoint",
        seed,
        "--reason",
        "start over",
        fault="put:4:before",
    )
    assert killed.returncode == -9, killed.stderr
    assert "plan 2 1 1" in (root / "turns.log").read_text().splitlines()
    started = [e for e in _events(root) if (e["node"], e["transition"]) == ("plan", "work-started")]
    assert [e["activation"] for e in started] == [1, 2]
    assert started[-1]["refs"][0]["kind"] == "launch"
    view = json.loads(_cli(root, "inspect", delivery, "--json").stdout)
    assert [a["node"] for a in view["interrupted"]] == ["plan"]
    assert view["mismatches"] == []

    done = _cli(root, "recover", delivery, "--directive", "continue", "--reason", "r")
    assert done.returncode == 0, done.stderr
    assert json.loads(_cli(root, "status", delivery, "--json").stdout)["status"] == "suspended"
    _check_interruptions(root)
    interrupted = [
        e for e in _events(root) if (e.get("error") or {}).get("code") == "ATTEMPT_INTERRUPTED"
    ]
    assert [(e["node"], e["activation"]) for e in interrupted] == [("plan", 2)]
    assert _cli(root, "journal", "verify", delivery).returncode == 0
    assert _phase(root, "input").returncode == 0
    assert _phase(root, "resolve").returncode == 0
    assert _cli(root, "journal", "verify", delivery).returncode == 0
    turns = Counter((root / "turns.log").read_text().splitlines())
    assert set(turns.values()) == {1}, turns
