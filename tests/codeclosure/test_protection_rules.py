"""What protects the acceptance-critical surface beyond the defaults, and what counts as a pass.

``--protect`` adds paths, a file a check's command line names is protected with
it, and a check that reports no tests (or none where its base did) is no pass.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from execution_system.codeclosure import DEFAULT_PROTECTED, PatchWorker
from execution_system.codeclosure._operations import shortfall
from tests.codeclosure.helpers import CALC, CHECK, CHECK_PATH, _diff, create, failures


def _patch(tmp_path: Path, name: str, text: str) -> PatchWorker:
    path = tmp_path / f"{name}.patch"
    path.write_text(text)
    return PatchWorker(patches=(str(path),))


def test_a_path_given_to_protect_is_refused_like_the_defaults(runtime, sample, aio):
    created = create(runtime, sample, sample.worker("direct"), protected=[*DEFAULT_PROTECTED, CALC])
    view = aio(runtime.start(created["goal"], 1))
    assert view["run_status"] == "FAILED"
    assert failures(runtime.host, view["delivery"]) == [("IMPLEMENT", "CUSTODY_PROTECTED_PATH")]


def test_a_file_a_check_runs_is_protected_with_it(runtime, sample, aio, tmp_path):
    checks = {**sample.checks, "other": (sys.executable, "src/other.py")}
    worker = _patch(tmp_path, "other", _diff("src/other.py", "x = 1\n", "x = 2\n"))
    created = create(runtime, sample, worker, checks=checks)
    assert "src/other.py" in runtime.goals.get(created["goal"])["goal"].protected
    view = aio(runtime.start(created["goal"], 1))
    assert failures(runtime.host, view["delivery"]) == [("IMPLEMENT", "CUSTODY_PROTECTED_PATH")]
    assert (sample.project / CHECK_PATH).read_text() == CHECK


@pytest.mark.parametrize(
    ("item", "why"),
    [
        ({"tests": {"selected": 0}, "base_tests": {"selected": 4}}, "it ran no tests"),
        ({"tests": {"selected": 0}, "base_tests": None}, "it ran no tests"),
        (
            {"tests": None, "base_tests": {"selected": 4}},
            "it did not report which tests ran (the base did)",
        ),
        ({"tests": None, "base_tests": None}, None),
        ({"tests": {"selected": 4}, "base_tests": {"selected": 4}}, None),
    ],
    ids=["none-ran", "none-ran-no-base", "no-report", "no-counts-anywhere", "as-many"],
)
def test_what_a_check_that_exited_0_still_fails_on(item, why):
    assert shortfall("tests", {"exit_status": 0, **item}, []) == why
