"""``pg_terminate_backend`` on a runner's connection in the middle of a step's commit.

The crash suite's scenario on PostgreSQL; its first phase (``run``) loses the
connection of its Nth checkpoint transaction just before the commit. The
runner reports one coded line and exits 1; nothing of that step is stored
(checkpoint, journal and custody agree); after ``recover continue`` the
delivery ends exactly as an uncrashed run does and no committed turn repeats.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.crash import test_crash_boundaries as crash
from tests.postgres.test_crash import postgres_roots  # noqa: F401  (fixture)

WRAPPER = Path(__file__).resolve().parent / "agents" / "terminating_execsys.py"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_connection_killed_mid_commit_loses_the_step_whole_and_nothing_else(
    postgres_roots: dict[Path, str],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reference = tmp_path / "reference"
    crash._prepare(reference)
    for phase in crash.PHASES:
        assert crash._phase(reference, phase).returncode == 0
    expected = crash._journal(reference)
    wrapper = tmp_path / "execsys"
    wrapper.write_text(f"#!{sys.executable}\n" + WRAPPER.read_text())
    wrapper.chmod(0o755)
    monkeypatch.setattr(crash, "EXECSYS", str(wrapper))
    for k in (2, 3):
        monkeypatch.setenv("EXECSYS_TEST_TERMINATE_AT", str(k))
        root = tmp_path / f"k{k}"
        crash._prepare(root)
        cut = crash._phase(root, "run")
        assert cut.returncode == 1, (cut.stdout, cut.stderr)
        lines = cut.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("execsys: STORE_"), cut.stderr
        assert "Traceback" not in cut.stderr
        monkeypatch.delenv("EXECSYS_TEST_TERMINATE_AT")
        crash._check_agreement(root, crashed=True)
        if crash._status(root) != crash.EXPECTED_STOP["run"]:
            recovered = crash._cli(
                root,
                "recover",
                crash._delivery(root),
                "--directive",
                "continue",
                "--reason",
                "connection lost",
                "--json",
            )
            assert recovered.returncode == 0, recovered.stderr
        crash._check_agreement(root)
        assert crash._status(root) == crash.EXPECTED_STOP["run"]
        crash._finish(root, "input")
        assert crash._check_agreement(root).status == "completed"
        assert crash._journal(root) == expected
        turns = (root / "turns.log").read_text().splitlines()
        repeated = [t for t, n in Counter(turns).items() if n > 1]
        assert all(t.split()[3] != "1" for t in repeated), repeated
    assert os.environ.get("EXECSYS_TEST_TERMINATE_AT") is None
