"""A representative subset of the crash suite on PostgreSQL: SIGKILL a runner at a commit.

The scenario and its checks are the crash suite's (``tests/crash``), with the
store of each scenario root a fresh PostgreSQL database. The first phase
(``run``: the planner, the question) is killed before and after each of its
checkpoint commits; an operator's ``recover continue`` and the remaining
phases must then end exactly as an uncrashed run does, with checkpoint,
journal and custody in agreement and no committed turn run again.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crash import test_crash_boundaries as crash
from tests.postgres.conftest import create_database, drop_database


class _Api(crash._Api):
    """The in-process Host, in the root's folder: a PostgreSQL store's data folder is the cwd's."""

    def __init__(self, root: Path) -> None:
        self._back = Path.cwd()
        os.chdir(root)
        super().__init__(root)

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        os.chdir(self._back)


@pytest.fixture
def postgres_roots(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[Path, str]]:
    """Give every scenario root a database of its own; drop them afterwards."""
    made: dict[Path, str] = {}
    monkeypatch.setattr(crash, "store_url", lambda root: made.setdefault(root, create_database()))
    monkeypatch.setattr(crash, "_Api", _Api)
    yield made
    for url in made.values():
        drop_database(url)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("pattern", ["put:{k}:before", "put:{k}:after"])
def test_a_runner_killed_at_a_commit_loses_and_repeats_nothing(
    postgres_roots: dict[Path, str], tmp_path: Path, pattern: str
) -> None:
    reference = tmp_path / "reference"
    crash._prepare(reference)
    for phase in crash.PHASES:
        done = crash._phase(reference, phase)
        assert done.returncode == 0, done.stderr
    expected = crash._journal(reference)
    killed = 0
    for k in range(1, 10):
        root = tmp_path / f"k{k}"
        crash._prepare(root)
        crashed = crash._phase(root, "run", fault=pattern.format(k=k))
        if crashed.returncode != -9:
            assert crashed.returncode == 0, crashed.stderr
            break  # past the phase's last commit: it simply completed
        killed += 1
        crash._check_agreement(root, crashed=True)
        recovered = crash._cli(
            root,
            "recover",
            crash._delivery(root),
            "--directive",
            "continue",
            "--reason",
            "crash test",
            "--json",
        )
        assert recovered.returncode == 0, recovered.stderr
        crash._check_agreement(root)
        assert crash._status(root) == crash.EXPECTED_STOP["run"]
        crash._finish(root, "input")
        final = crash._check_agreement(root)
        assert final.status == "completed"
        assert crash._journal(root) == expected
        crash._check_interruptions(root)
        turns = (root / "turns.log").read_text().splitlines()
        repeated = [t for t, n in Counter(turns).items() if n > 1]
        if pattern.endswith(":after"):
            assert repeated == [], repeated  # the killed step had committed
        else:
            assert all(t.split()[3] != "1" for t in repeated), repeated
    assert killed >= 2, "the fault never fired at a commit of the phase"
