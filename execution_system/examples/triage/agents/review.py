"""Python executors of the triage example: a planner and a reviewer."""

from __future__ import annotations

from typing import Any

from contracts import InvocationRequest


async def plan(request: InvocationRequest) -> dict[str, Any]:
    """Pick the checks a ticket needs: code tickets skip the docs check."""
    ticket = str(request.input.get("ticket", "")).lower()
    checks = ["lint", "tests"] if "docs" not in ticket else ["lint", "tests", "docs"]
    return {"status": "completed", "output": {"checks": checks}}


async def review(request: InvocationRequest) -> dict[str, Any]:
    """Ask for one rework round, then approve (the loop is bounded by max_visits)."""
    verdict = "rework" if request.activation == 1 else "approve"
    return {"status": "completed", "output": {"verdict": verdict}}
