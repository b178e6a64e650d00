"""Two processes racing on one delivery on PostgreSQL: one continues it, the thread never forks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.host.test_lease import HERE, SPEC
from tests.postgres.conftest import create_database, drop_database

EXECSYS = str(Path(sys.executable).with_name("execsys"))


def _execsys(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXECSYS, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.slow
# Ten rounds of three processes each: well past the default per-test bound on a loaded machine.
@pytest.mark.timeout(900)
def test_two_processes_answering_one_question_continue_it_once_and_never_fork(
    tmp_path: Path,
) -> None:
    for round_no in range(10):
        tmp = tmp_path / f"r{round_no}"
        tmp.mkdir()
        (tmp / "spec.yaml").write_text(SPEC)
        (tmp / "execsys.yaml").write_text(
            f"executors:\n  asker: {{command: [{sys.executable}, {HERE / 'agents' / 'ask.py'}]}}\n"
        )
        (tmp / "answer.json").write_text('"left"')
        log = tmp / "turns.log"
        url = create_database()
        env = {**os.environ, "EXECSYS_STORE": url, "EXECSYS_TEST_LOG": str(log)}
        try:
            started = _execsys(env, tmp, "run", "spec.yaml", "--json")
            assert started.returncode == 0, started.stderr
            report = json.loads(started.stdout)
            delivery, correlation = report["delivery"], report["suspension"]["correlation"]
            argv = [EXECSYS, "input", delivery, "--correlation", correlation]
            racers = [
                subprocess.Popen(
                    [*argv, "--response", "answer.json", "--json"],
                    env=env,
                    cwd=tmp,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for _ in range(2)
            ]
            outputs = [p.communicate(timeout=120) for p in racers]
            results = [(p.returncode, err) for p, (_, err) in zip(racers, outputs, strict=True)]
            assert sorted(code for code, _ in results) == [0, 1], results
            loser = next(err for code, err in results if code == 1)
            assert "CORRELATION_USED" in loser or "LEASE_HELD" in loser, loser
            assert loser.count("\n") == 1, "one line"
            assert log.read_text().splitlines() == ["ask 1 1 1", "ask 1 1 2"]
            final = json.loads(_execsys(env, tmp, "status", delivery, "--json").stdout)
            assert final["status"] == "completed"
            with psycopg.connect(url) as conn:
                parents = conn.execute(
                    "SELECT parent_checkpoint_id, count(*) FROM checkpoints "
                    "WHERE checkpoint_ns = '' GROUP BY 1 HAVING count(*) > 1"
                ).fetchall()
            assert parents == [], "two checkpoints with one parent: the thread forked"
        finally:
            drop_database(url)
