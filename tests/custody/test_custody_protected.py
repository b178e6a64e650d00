"""Protected patterns: prefixes as before, globs per path component, ``**`` across folders."""

from __future__ import annotations

import pytest

from execution_system.custody import protected_by

PATTERNS = ("tests", "**/conftest.py", "pyproject.toml", ".github", "src/*/fixtures")

CASES = [
    ("tests", True),
    ("tests/test_a.py", True),
    ("testsuite/a.py", False),
    ("conftest.py", True),
    ("src/pkg/conftest.py", True),
    ("src/pkg/conftest.pyc", False),
    ("src/pkg/myconftest.py", False),
    ("pyproject.toml", True),
    ("sub/pyproject.toml", False),
    (".github/workflows/ci.yml", True),
    ("src/pkg/fixtures/data.json", True),
    ("src/pkg/sub/fixtures/data.json", False),
    ("src/pkg/calc.py", False),
]


@pytest.mark.parametrize(("path", "guarded"), CASES)
def test_protected_patterns(path: str, guarded: bool) -> None:
    assert protected_by(path, PATTERNS) is guarded


def test_no_patterns_guard_nothing() -> None:
    assert not protected_by("conftest.py", ())
