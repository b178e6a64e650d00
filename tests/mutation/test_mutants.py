"""The mutant list stays applicable: each snippet is still there, once, and its tests exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mutation.mutants import MUTANTS, Mutant

ROOT = Path(__file__).resolve().parents[2]


def test_mutant_ids_are_unique() -> None:
    ids = [m.id for m in MUTANTS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.id)
def test_each_mutant_applies_to_the_current_tree(mutant: Mutant) -> None:
    text = (ROOT / mutant.file).read_text()
    assert text.count(mutant.original) == 1, "update tests/mutation/mutants.py"
    assert mutant.original != mutant.replacement
    assert mutant.tests and all((ROOT / t).is_file() for t in mutant.tests)
