"""``execsys submit``: a delivery is admitted and queued, and nothing of it runs."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fleet.conftest import Fleet


def test_a_submitted_delivery_is_queued_and_runs_nothing(fleet: Fleet) -> None:
    delivery = fleet.submit(1)
    assert fleet.statuses() == {delivery: "queued"}
    assert fleet.turns() == {}
    inspected = json.loads(fleet.cli("inspect", delivery, "--json").stdout)
    assert inspected["status"] == "queued"
    assert "stop" in inspected["directives"]
    verified = fleet.cli("journal", "verify", delivery)
    assert verified.returncode == 0, verified.stderr


def test_submit_refuses_what_run_refuses(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, f"sqlite:///{tmp_path / 'state.db'}")
    (tmp_path / "in.json").write_text('{"n": 1}')
    first = fleet.cli("submit", "spec.yaml", "--input", "in.json", "--key", "k")
    assert first.returncode == 0, first.stderr
    again = fleet.cli("submit", "spec.yaml", "--input", "in.json", "--key", "k")
    assert again.returncode == 1
    assert again.stderr.startswith("execsys: DELIVERY_EXISTS at ")
    (tmp_path / "bad.json").write_text('{"n": "one"}')
    bad = fleet.cli("submit", "spec.yaml", "--input", "bad.json")
    assert bad.returncode == 2
    assert len(bad.stderr.splitlines()) == 1 and bad.stderr.startswith("execsys: ")
    assert len(fleet.statuses()) == 1
