"""CodeClosure's Host-owned operations: acceptance, re-evaluation, closeout.

Each is a pure function of one immutable input manifest, so the decision it
records is reproducible from the journal's references: the same goal
revision, frozen digest and evidence set always give the same decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contracts import digest_of
from host import Operation, OperationContext


def manifest_of(
    revision: int,
    frozen: str,
    evidence: Mapping[str, Any],
    protected: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The acceptance input manifest: goal revision, frozen digest, evidence set.

    ``protected`` (path -> content digest of every protected file of the frozen
    tree) binds the tests and configuration the decision relied on.
    """
    manifest: dict[str, Any] = {
        "goal_revision": revision,
        "frozen": frozen,
        "evidence": {name: dict(evidence[name]) for name in sorted(evidence)},
    }
    if protected is not None:
        manifest["protected"] = {path: protected[path] for path in sorted(protected)}
    return manifest


def shortfall(name: str, item: Mapping[str, Any], allow_fewer: Sequence[str]) -> str | None:
    """Why a check's evidence is not a pass although it exited 0, or None.

    A check that reports what it ran (test counts) must have run at least one
    test, and no fewer than the base did unless the goal allows it; a check
    whose base reported counts must report them too. A check the candidate
    would have hijacked (``shadows``, see ``agents/_shadow.py``) did not run.
    """
    if item.get("shadows"):
        return (
            f"the candidate adds {', '.join(item['shadows'])} at the top of the import path, "
            "where it would stand in for what the check imports; the check was not run"
        )
    tests, base = item.get("tests"), item.get("base_tests")
    if tests is None:
        return "it did not report which tests ran (the base did)" if base else None
    selected = int(tests.get("selected", 0))
    if selected == 0:
        return "it ran no tests"
    if base and selected < int(base.get("selected", 0)) and name not in allow_fewer:
        return (
            f"it selected {selected} tests, fewer than the base's {base['selected']} "
            f"({tests.get('deselected', 0)} deselected)"
        )
    return None


def accept(inputs: Mapping[str, Any], context: OperationContext) -> dict[str, Any]:
    """FINAL_VERIFY: decide over exactly one manifest."""
    frozen = str(inputs["frozen"])
    evidence = {key[3:]: value for key, value in inputs.items() if key.startswith("ev_")}
    protected = inputs.get("protected")
    manifest = digest_of(manifest_of(int(inputs["revision"]), frozen, evidence, protected))
    generation = int(context.visits.get("IMPLEMENT", 1))
    base = {"manifest": manifest, "frozen": frozen, "generation": generation}
    specs = inputs["specs"]
    ineligible = [
        name
        for name, item in evidence.items()
        if item.get("frozen") != frozen or item.get("spec") != specs.get(name)
    ]
    if ineligible or not evidence:
        why = (
            f"evidence of {', '.join(sorted(ineligible))} is bound to another digest or "
            "check specification"
            if ineligible
            else "no evidence was produced"
        )
        return {**base, "decision": "ENGINE_ERROR", "feedback": why}
    required = [name for name in inputs["required"] if name in evidence]
    allowed = list(inputs.get("allow_fewer") or [])
    short = {name: shortfall(name, item, allowed) for name, item in evidence.items()}
    failing = sorted(
        name for name, item in evidence.items() if item["exit_status"] != 0 or short[name]
    )
    failing_required = [name for name in failing if name in required]
    if not failing:
        return {**base, "decision": "ACCEPT", "feedback": "every selected check passed"}
    tails = "; ".join(
        f"{name}: {short[name] or evidence[name].get('tail', '')}" for name in failing
    )
    if failing_required:
        if generation < int(inputs["max_generations"]):
            return {
                **base,
                "decision": "REJECT_REPAIRABLE",
                "feedback": f"required checks failed: {tails}",
            }
        return {
            **base,
            "decision": "REJECT_BLOCKED",
            "feedback": f"required checks still fail after {generation} generations: {tails}",
        }
    return {
        **base,
        "decision": "NEEDS_DECISION",
        "feedback": f"only non-required checks failed: {tails}",
    }


def reevaluate(inputs: Mapping[str, Any], context: OperationContext) -> dict[str, Any]:
    """REEVALUATE: apply a maintainer's decision to the same manifest."""
    decision = "ACCEPT" if inputs["accept"] is True else "REJECT_BLOCKED"
    return {"decision": decision, "manifest": inputs["manifest"]}


class CloseoutRefused(Exception):
    """CLOSEOUT was reached without a current ACCEPT for the current digest."""


def closeout(inputs: Mapping[str, Any], context: OperationContext) -> dict[str, Any]:
    """CLOSEOUT: consume the current ACCEPT, and only that."""
    current = inputs.get("reverdict") or inputs["verdict"]
    if current != "ACCEPT":
        raise CloseoutRefused(f"the current decision is {current}, not ACCEPT")
    if inputs["accepted"] != inputs["frozen"]:
        raise CloseoutRefused("the accepted digest is not the current frozen digest")
    return {"closed": True, "manifest": inputs["manifest"], "frozen": inputs["frozen"]}


OPERATIONS: dict[str, Operation] = {
    "codeclosure.accept": accept,
    "codeclosure.reevaluate": reevaluate,
    "codeclosure.closeout": closeout,
}
"""Registered with the Host by the CodeClosure runtime."""
