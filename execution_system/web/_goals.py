"""A goal's accepted change as a download: ``GET /api/v1/goals/{goal}/export`` and the console's.

The body is the text ``execsys goal export GOAL`` prints (a header naming the
base, the accepted digest and the manifest, then a unified diff), served as
``text/x-diff`` with ``Content-Disposition: attachment``, so a browser saves it
instead of rendering it: a hostile file name or content in the change cannot
become markup in the console's origin (``nosniff`` and the CSP hold too).
"""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from contracts import ErrorCode, error
from execution_system.web._auth import Action, Principal
from execution_system.web._state import WebState, audit

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def patch_text(report: dict[str, Any]) -> str:
    """The accepted change as ``execsys goal export`` writes it (header, then the diff)."""
    return (
        f"# execsys goal export {report['goal']}: the accepted change\n"
        f"# base {report['base']}\n# accepted {report['frozen']}\n"
        f"# manifest {report['manifest']}\n" + str(report["patch"])
    )


def filename(goal: str) -> str:
    """A download name that is safe in a header whatever the goal id holds."""
    return "goal-" + (_UNSAFE.sub("_", goal)[:80] or "_") + ".patch"


def export_response(state: WebState, who: Principal, goal: str) -> Response:
    """The download of ``goal``'s accepted change (GOAL_NOT_ACCEPTED before it closed)."""
    who.require(Action.READ)
    if state.goals is None:
        raise error(ErrorCode.GOAL_NOT_FOUND, "this server serves no goals", path=goal)
    report = state.goals.export(goal)
    audit(who, "goal-export", goal, f"ok {len(report.get('files', []))} file(s)")
    return Response(
        patch_text(report).encode("utf-8"),
        media_type="text/x-diff; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="{filename(goal)}"',
            "Cache-Control": "no-store",
        },
    )


async def api_export(request: Request, state: WebState, who: Principal) -> Response:
    """``GET /api/v1/goals/{goal}/export``."""
    return export_response(state, who, str(request.path_params["goal"]))
