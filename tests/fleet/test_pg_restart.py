"""The PostgreSQL server restarts under two runners: they wait it out and carry on.

The server is a private cluster the test makes (the machine's own is shared by
other tests). Deliveries in flight across the restart either continue (their
next write finds a fresh connection) or, if a write was lost with the old
server, wait for a directive; nothing is lost and no committed turn runs twice.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fleet._cluster import private_cluster
from tests.fleet.conftest import Fleet, stopped, wait_until

NODES = {"one", "slow", "three"}


def _err(fleet: Fleet, name: str) -> str:
    return (fleet.root / f"{name}.err").read_text()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_runners_survive_a_server_restart_and_nothing_is_lost_or_doubled(tmp_path: Path) -> None:
    with private_cluster() as cluster:
        fleet = Fleet(tmp_path / "root", cluster.url)
        deliveries = [fleet.submit(n) for n in range(3)]
        runners = {name: fleet.serve(name, "--concurrency", "2") for name in ("a", "b")}
        try:
            wait_until(
                lambda: all((d, "slow", "1", "1", "1") in fleet.turns() for d in deliveries),
                what="every delivery in its slow step",
            )
            cluster.stop("fast")
            wait_until(
                lambda: all("STORE_UNREACHABLE" in _err(fleet, name) for name in runners),
                what="both runners seeing the server gone",
            )
            assert all(p.poll() is None for p in runners.values()), "a runner exited"
            cluster.start()
            deliveries.append(fleet.submit(3))  # new work after the restart is claimed too
            fleet.release.touch()

            def settled() -> bool:
                status = json.loads(fleet.cli("status", "--json").stdout)
                waiting = {e["delivery"] for e in status["needs_directive"]}
                rows = {r["delivery"]: r["status"] for r in status["deliveries"]}
                return all(rows[d] == "completed" or d in waiting for d in deliveries)

            wait_until(settled, what="every delivery completed or waiting for a directive")
            listed = json.loads(fleet.cli("status", "--json").stdout)["needs_directive"]
            for entry in listed:
                queued = fleet.cli(
                    "recover", entry["delivery"], "--directive", "continue",
                    "--reason", "server restarted", "--queue",
                )  # fmt: skip
                if queued.returncode != 0:
                    # Listed while its lease had lapsed in the outage; its runner, back on
                    # the store, renewed the lease (nobody took it over) and finished it.
                    assert "DIRECTIVE_NOT_APPLICABLE" in queued.stderr, queued.stderr
                    assert fleet.statuses()[entry["delivery"]] == "completed", queued.stderr
            wait_until(
                lambda: set(fleet.statuses().values()) == {"completed"},
                what="every delivery completed",
            )
            assert all(p.poll() is None for p in runners.values()), "a runner exited"
        finally:
            codes = [stopped(p) for p in runners.values()]
        errors = {name: _err(fleet, name) for name in runners}
        assert codes == [0, 0], errors
        for text in errors.values():
            assert "Traceback" not in text
            assert all(line.startswith("execsys: ") for line in text.splitlines()), text
        turns = fleet.turns()
        assert set(turns.values()) == {1}, "no turn ran twice"
        for delivery in deliveries:
            assert {t[1] for t in turns if t[0] == delivery} == NODES
            verified = fleet.cli("journal", "verify", delivery)
            assert verified.returncode == 0, (delivery, verified.stderr)
