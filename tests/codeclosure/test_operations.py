"""Acceptance and closeout as pure operations (M1 proofs 5 and 6)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import digest_of
from execution_system.codeclosure import OPERATIONS, manifest_of
from execution_system.codeclosure._operations import CloseoutRefused
from host import OperationContext

accept = OPERATIONS["codeclosure.accept"]
reevaluate = OPERATIONS["codeclosure.reevaluate"]
closeout = OPERATIONS["codeclosure.closeout"]

FROZEN = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64
SPECS = {"tests": "sha256:" + "1" * 64, "lint": "sha256:" + "2" * 64}


def _context(generation: int = 1, node: str = "FINAL_VERIFY") -> OperationContext:
    return OperationContext(
        delivery="d-" + "0" * 24, node=node, activation=generation, visits={"IMPLEMENT": generation}
    )


def _evidence(check: str, exit_status: int = 0, **over: Any) -> dict[str, Any]:
    item = {
        "check": check,
        "exit_status": exit_status,
        "output_digest": "sha256:" + "c" * 64,
        "duration_s": 0.5,
        "frozen": FROZEN,
        "spec": SPECS[check],
        "tail": "",
    }
    return {**item, **over}


def _inputs(*items: dict[str, Any], required=("tests",), revision=1, frozen=FROZEN, max_gen=3):
    return {
        "revision": revision,
        "frozen": frozen,
        "required": list(required),
        "specs": SPECS,
        "max_generations": max_gen,
        **{f"ev_{item['check']}": item for item in items},
    }


# --- acceptance decisions ----------------------------------------------------------------


def test_all_passing_evidence_is_accepted():
    out = accept(_inputs(_evidence("tests"), _evidence("lint")), _context())
    assert out["decision"] == "ACCEPT"
    assert out["frozen"] == FROZEN
    assert out["generation"] == 1


def test_a_failing_required_check_is_repairable_until_the_last_generation():
    failing = _inputs(_evidence("tests", 1))
    assert accept(failing, _context(1))["decision"] == "REJECT_REPAIRABLE"
    assert accept(failing, _context(2))["decision"] == "REJECT_REPAIRABLE"
    assert accept(failing, _context(3))["decision"] == "REJECT_BLOCKED"


def test_a_failing_optional_check_needs_a_decision():
    out = accept(_inputs(_evidence("tests"), _evidence("lint", 1)), _context())
    assert out["decision"] == "NEEDS_DECISION"
    assert "lint" in out["feedback"]


@pytest.mark.parametrize(
    "bad",
    [
        {"frozen": OTHER},  # evidence of another candidate
        {"spec": "sha256:" + "9" * 64},  # evidence of another check specification
    ],
    ids=["frozen", "spec"],
)
@pytest.mark.parametrize("which", ["tests", "lint"])
def test_a_mismatched_manifest_is_an_engine_error_never_accept(bad, which):
    items = [_evidence("tests"), _evidence("lint")]
    items = [{**item, **bad} if item["check"] == which else item for item in items]
    out = accept(_inputs(*items), _context())
    assert out["decision"] == "ENGINE_ERROR"
    assert which in out["feedback"]


def test_no_evidence_is_an_engine_error():
    assert accept(_inputs(), _context())["decision"] == "ENGINE_ERROR"


def test_the_manifest_binds_revision_digest_and_evidence():
    base = accept(_inputs(_evidence("tests")), _context())
    assert base["manifest"] == digest_of(manifest_of(1, FROZEN, {"tests": _evidence("tests")}))
    variants = [
        _inputs(_evidence("tests"), revision=2),
        _inputs(_evidence("tests", frozen=OTHER), frozen=OTHER),
        _inputs(_evidence("tests", duration_s=0.6)),
        _inputs(_evidence("tests"), _evidence("lint")),
    ]
    manifests = {accept(v, _context())["manifest"] for v in variants}
    assert base["manifest"] not in manifests
    assert len(manifests) == len(variants)


_ITEM = st.fixed_dictionaries(
    {
        "exit_status": st.integers(0, 2),
        "frozen": st.sampled_from([FROZEN, OTHER]),
        "duration_s": st.floats(0, 10, allow_nan=False),
    }
)


@settings(max_examples=60, deadline=None)
@given(
    items=st.dictionaries(st.sampled_from(sorted(SPECS)), _ITEM, max_size=2),
    revision=st.integers(1, 5),
    generation=st.integers(1, 3),
    reverse=st.booleans(),
)
def test_same_manifest_inputs_give_the_same_manifest_and_decision(
    items, revision, generation, reverse
):
    evidence = [_evidence(name, **over) for name, over in sorted(items.items())]
    first = accept(_inputs(*evidence, revision=revision), _context(generation))
    # Same inputs, another order, another activation: the same manifest and decision.
    again = accept(
        _inputs(*(reversed(evidence) if reverse else evidence), revision=revision),
        _context(generation),
    )
    assert again == first
    assert first["manifest"] == digest_of(
        manifest_of(revision, FROZEN, {e["check"]: e for e in evidence})
    )
    if any(e["frozen"] != FROZEN for e in evidence) or not evidence:
        assert first["decision"] == "ENGINE_ERROR"
    elif all(e["exit_status"] == 0 for e in evidence):
        assert first["decision"] == "ACCEPT"
    else:
        assert first["decision"] != "ACCEPT"


# --- re-evaluation and closeout ----------------------------------------------------------


def test_reevaluate_accepts_only_an_explicit_true():
    manifest = "sha256:" + "d" * 64
    assert reevaluate({"accept": True, "manifest": manifest}, _context())["decision"] == "ACCEPT"
    for value in (False, "yes", 1, None):
        out = reevaluate({"accept": value, "manifest": manifest}, _context())
        assert out == {"decision": "REJECT_BLOCKED", "manifest": manifest}


def _closeout(verdict: str, reverdict: str | None = None, accepted: str = FROZEN):
    inputs = {
        "verdict": verdict,
        "manifest": "sha256:" + "d" * 64,
        "accepted": accepted,
        "frozen": FROZEN,
    }
    if reverdict is not None:
        inputs["reverdict"] = reverdict
    return closeout(inputs, _context(node="CLOSEOUT"))


@pytest.mark.parametrize(
    ("verdict", "reverdict"),
    [
        ("REJECT_REPAIRABLE", None),
        ("REJECT_BLOCKED", None),
        ("NEEDS_DECISION", None),
        ("ENGINE_ERROR", None),
        ("NEEDS_DECISION", "REJECT_BLOCKED"),
        ("ACCEPT", "REJECT_BLOCKED"),  # a later refusal supersedes an earlier ACCEPT
    ],
)
def test_closeout_refuses_without_a_current_accept(verdict, reverdict):
    with pytest.raises(CloseoutRefused, match="not ACCEPT"):
        _closeout(verdict, reverdict)


def test_closeout_refuses_an_accept_of_another_digest():
    with pytest.raises(CloseoutRefused, match="not the current frozen digest"):
        _closeout("ACCEPT", accepted=OTHER)
    with pytest.raises(CloseoutRefused, match="not the current frozen digest"):
        _closeout("NEEDS_DECISION", "ACCEPT", accepted=OTHER)


def test_closeout_consumes_a_current_accept():
    assert _closeout("ACCEPT")["closed"] is True
    assert _closeout("NEEDS_DECISION", "ACCEPT") == {
        "closed": True,
        "manifest": "sha256:" + "d" * 64,
        "frozen": FROZEN,
    }
