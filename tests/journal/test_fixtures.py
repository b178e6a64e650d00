"""The recorded fixture pack: valid journals replay, each adversarial copy fails with its code."""

from __future__ import annotations

import io

import pytest

from contracts import ExecsysError
from host.journal import ordinal_of, replay_lines, verify_lines

from .make_fixtures import EXPECTED, FIXTURES, build_all
from .scenario import POLICY


def _verify(name: str) -> str:
    report = verify_lines(io.BytesIO((FIXTURES / name).read_bytes()))
    return "ok" if report.ok else f"{report.code}@{report.ordinal}"


def _replay(name: str) -> str:
    try:
        replay_lines(io.BytesIO((FIXTURES / name).read_bytes()), POLICY)
    except ExecsysError as exc:
        return f"{exc.code}@{ordinal_of(exc)}"
    return "ok"


def test_pack_is_complete_and_current() -> None:
    on_disk = {path.name: path.read_bytes() for path in FIXTURES.glob("*.jsonl")}
    assert on_disk == build_all(), "run `python -m tests.journal.make_fixtures` and commit"
    assert set(on_disk) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_verify_outcome(name: str) -> None:
    assert _verify(name) == EXPECTED[name][0]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_replay_outcome(name: str) -> None:
    assert _replay(name) == EXPECTED[name][1]
