"""A goal's accepted change as a download: the API path, the console's link, roles, escaping."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from contracts import ErrorCode, error
from execution_system.web import create_app, load_tokens
from tests.web.conftest import EXECUTORS, HOSTILE, Site
from tests.web.test_console import Goals, assert_clean, browse, login

EXECSYS = str(Path(sys.executable).with_name("execsys"))
HOSTILE_ID = HOSTILE.replace("/", "")  # a path segment: markup, quotes, control characters
PATCH = f"--- a/{HOSTILE}\n+++ b/{HOSTILE}\n@@ -1 +1 @@\n-<b>old</b>\n+<script>new()</script>\n"


class ClosedGoals(Goals):
    """The hostile goal, closed with an accepted change (g-open has none yet)."""

    def audit(self, goal_id: str) -> dict[str, Any]:
        closed = goal_id != "g-open"
        return {**super().audit(goal_id), "run_status": "CLOSED" if closed else "RUNNING"}

    def export(self, goal_id: str) -> dict[str, Any]:
        if goal_id == "g-open":
            raise error(ErrorCode.GOAL_NOT_ACCEPTED, "not closed", path=goal_id)
        return {
            "goal": goal_id,
            "format": "patch",
            "base": "sha256:" + "0" * 64,
            "frozen": "sha256:" + "1" * 64,
            "manifest": "sha256:" + "2" * 64,
            "files": [HOSTILE],
            "patch": PATCH,
        }


def _site(site: Site) -> Site:
    site.app = create_app(
        site.host, tokens=load_tokens(site.tokens_path), goals=ClosedGoals(), executors=EXECUTORS
    )
    return site


def test_the_api_serves_the_accepted_change_as_a_download(site: Site) -> None:
    _site(site)
    goal = "g-1"
    reply = site.call("GET", f"/api/v1/goals/{goal}/export", "viewer")
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"] == "text/x-diff; charset=utf-8"
    assert reply.headers["content-disposition"] == 'attachment; filename="goal-g-1.patch"'
    assert reply.headers["x-content-type-options"] == "nosniff"
    assert reply.text.startswith(f"# execsys goal export {goal}: the accepted change\n")
    assert reply.text.endswith(PATCH)  # the change itself, byte for byte
    # A goal id full of markup and quotes never reaches the header unsanitized.
    hostile = site.call("GET", f"/api/v1/goals/{quote(HOSTILE_ID, safe='')}/export", "operator")
    assert hostile.status_code == 200
    name = hostile.headers["content-disposition"].split('filename="', 1)[1][:-1]
    assert name.startswith("goal-") and name.endswith(".patch")
    assert all(c.isalnum() or c in "._-" for c in name), name


def test_no_accepted_change_no_role_no_goal(site: Site) -> None:
    _site(site)
    refused = site.call("GET", "/api/v1/goals/g-open/export", "viewer")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "GOAL_NOT_ACCEPTED"
    assert site.call("GET", "/api/v1/goals/g-1/export", "agent").status_code == 403
    assert site.call("GET", "/api/v1/goals/g-1/export").status_code == 401


def test_the_goal_page_links_the_download_only_once_closed(site: Site) -> None:
    _site(site)

    async def script(client: httpx.AsyncClient) -> None:
        await login(client, site.secrets["approver"])
        closed = await client.get("/goals/g-1")
        assert 'href="/goals/g-1/export"' in closed.text
        assert_clean(closed.text)
        assert 'href="/goals/g-open/export"' not in (await client.get("/goals/g-open")).text
        download = await client.get("/goals/g-1/export")
        assert download.status_code == 200
        assert download.headers["content-disposition"].startswith("attachment;")
        assert download.text.endswith(PATCH)
        hostile = await client.get(f"/goals/{quote(HOSTILE_ID, safe='')}")
        assert_clean(hostile.text)
        assert f"/goals/{quote(HOSTILE_ID, safe='')}/export" in hostile.text

    browse(site, script, site.app)

    async def agent(client: httpx.AsyncClient) -> None:
        await login(client, site.secrets["agent"])
        assert (await client.get("/goals/g-1/export")).status_code == 403

    browse(site, agent, site.app)


def test_the_download_is_the_text_of_goal_export(tmp_path: Path) -> None:
    from execution_system.codeclosure import GoalRuntime
    from tests.codeclosure.helpers import create, make_sample

    sample = make_sample(tmp_path)
    runtime = GoalRuntime(sample.store)
    try:
        created = create(runtime, sample, sample.worker("direct"))
        view = asyncio.run(runtime.start(created["goal"], 1))
        assert view["run_status"] == "CLOSED", view["detail"]
        app = create_app(runtime.runner.host, goals=runtime)

        async def fetch() -> httpx.Response:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
                return await c.get(f"/api/v1/goals/{created['goal']}/export")

        served = asyncio.run(fetch())
    finally:
        runtime.close()
    assert served.status_code == 200, served.text
    cli = subprocess.run(
        [EXECSYS, "goal", "export", created["goal"], "--store", sample.store],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert served.content == cli.stdout
