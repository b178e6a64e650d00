"""The console: login, session cookie, CSRF, CSP, the forms, and hostile strings on every page."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from execution_system.web import CSP, add_token, create_app, load_tokens
from tests.web.conftest import EXECUTORS, HOSTILE, Site

Script = Callable[[httpx.AsyncClient], Awaitable[Any]]


def browse(site: Site, script: Script, app: Any = None) -> Any:
    async def main() -> Any:
        transport = httpx.ASGITransport(app=app or site.app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers={"Accept": "text/html"}
        ) as client:
            return await script(client)

    return asyncio.run(main())


async def login(client: httpx.AsyncClient, token: str) -> None:
    form = await client.get("/login")
    response = await client.post(
        "/login", data={"token": token, "next": "/", "csrf": csrf_of(form.text)}
    )
    assert response.status_code == 303, response.text
    cookie = response.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field in the page"
    return found.group(1)


def assert_clean(html: str) -> None:
    # The hostile text may appear, escaped; never as markup.
    assert "<script>alert" not in html and "<img" not in html
    for raw in ("\x1b", "\x00", "\u202e"):
        assert raw not in html


def test_pages_need_a_login_and_send_a_strict_csp(site: Site) -> None:
    async def script(client: httpx.AsyncClient) -> None:
        page = await client.get("/")
        assert page.status_code == 303 and page.headers["location"].startswith("/login")
        form = await client.get("/login")
        assert form.headers["content-security-policy"] == CSP
        assert "script-src 'self'" in CSP and "'unsafe-inline'" not in CSP
        assert "<script>" not in form.text  # no inline script, only <script src=...>
        bad = await client.post("/login", data={"token": "est_wrong", "csrf": csrf_of(form.text)})
        assert bad.status_code == 401
        assert "execsys_session" not in bad.headers.get("set-cookie", "")
        await login(client, site.secrets["viewer"])
        page = await client.get("/")
        assert page.status_code == 200 and site.secrets["first"] in page.text
        assert page.headers["x-frame-options"] == "DENY"

    browse(site, script)


def test_every_asset_is_served_locally(site: Site) -> None:
    async def script(client: httpx.AsyncClient) -> None:
        await login(client, site.secrets["viewer"])
        html = (await client.get(f"/deliveries/{site.secrets['first']}")).text
        links = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert links and all(link.startswith("/") for link in links), links
        assets = [link for link in links if link.startswith("/static/")]
        assert len(assets) == 2 and all("?v=" in link for link in assets), assets
        for asset in assets:
            served = await client.get(asset)
            assert served.status_code == 200
            assert "immutable" in served.headers["cache-control"]

    browse(site, script)


def test_a_form_without_its_csrf_token_is_refused(site: Site) -> None:
    did = site.waiting()

    async def script(client: httpx.AsyncClient) -> None:
        await login(client, site.secrets["approver"])
        html = (await client.get(f"/deliveries/{did}")).text
        form = {"node": "signoff", "role": "maintainer", "result": '{"approved": true}'}
        refused = await client.post(f"/deliveries/{did}/resolve", data={**form, "csrf": "forged"})
        assert refused.status_code == 403 and "CSRF_INVALID" in refused.text
        assert site.host.status(did).status.value == "waiting"
        done = await client.post(f"/deliveries/{did}/resolve", data={**form, "csrf": csrf_of(html)})
        assert done.status_code == 303
        assert site.host.status(did).status.value == "completed"

    browse(site, script)


def test_an_agent_answers_its_question_in_the_console(site: Site) -> None:
    did = site.secrets["first"]
    correlation = site.host.status(did).suspension.correlation
    elsewhere = site.start()

    # An agent sees its delivery's status and question, nothing of the graph or journal.
    async def answer(client: httpx.AsyncClient) -> None:
        await login(client, site.secrets["agent"])
        page = await client.get(f"/deliveries/{did}")
        assert page.status_code == 200
        assert "which colour?" in page.text and "Timeline" not in page.text
        assert "<svg" not in page.text
        other = await client.get(f"/deliveries/{elsewhere}")
        assert other.status_code == 403
        csrf = csrf_of(page.text)
        reply = await client.post(
            f"/deliveries/{did}/answer",
            data={"csrf": csrf, "correlation": correlation, "response": '"green"'},
        )
        assert reply.status_code == 303, reply.text
        assert site.host.status(did).status.value == "waiting"

    browse(site, answer)


def test_a_viewer_sees_no_forms_and_is_refused_a_post(site: Site) -> None:
    did = site.waiting()

    async def script(client: httpx.AsyncClient) -> None:
        await login(client, site.secrets["viewer"])
        html = (await client.get(f"/deliveries/{did}")).text
        assert "/resolve" not in html and "/directive" not in html
        assert '<g class="node state-blocked kind-wait on-path">' in html  # the diagram, as SVG
        csrf = csrf_of(html)  # the logout form still carries one
        reply = await client.post(
            f"/deliveries/{did}/resolve",
            data={"csrf": csrf, "node": "signoff", "role": "maintainer", "result": "{}"},
        )
        assert reply.status_code == 403 and "AUTH_FORBIDDEN" in reply.text
        assert site.host.status(did).status.value == "waiting"

    browse(site, script)


def test_a_directive_needs_a_reason_and_a_confirmation(site: Site) -> None:
    did = site.waiting()

    async def script(client: httpx.AsyncClient) -> None:
        await login(client, site.secrets["operator"])
        html = (await client.get(f"/deliveries/{did}")).text
        csrf = csrf_of(html)
        url = f"/deliveries/{did}/directive"
        no_reason = await client.post(url, data={"csrf": csrf, "directive": "stop", "reason": ""})
        assert no_reason.status_code == 400
        confirm = await client.post(url, data={"csrf": csrf, "directive": "stop", "reason": "r1"})
        assert confirm.status_code == 200 and 'name="confirm" value="yes"' in confirm.text
        assert site.host.status(did).status.value == "waiting"  # nothing happened yet
        done = await client.post(
            url, data={"csrf": csrf, "directive": "stop", "reason": "r1", "confirm": "yes"}
        )
        assert done.status_code == 303
        assert site.host.status(did).status.value == "stopped"
        page = (await client.get(f"/deliveries/{did}")).text
        assert 'value="continue"' in page
        done = await client.post(
            url,
            data={"csrf": csrf, "directive": "continue", "reason": HOSTILE, "confirm": "yes"},
        )
        assert done.status_code == 303, done.text
        assert site.host.status(did).status.value == "waiting"
        assert_clean((await client.get(f"/deliveries/{did}")).text)

    browse(site, script)


class Goals:
    """A goal source holding one goal made of hostile strings."""

    def list(self) -> list[dict[str, Any]]:
        return [{"goal": "g-1", "objective": HOSTILE}]

    def audit(self, goal_id: str) -> dict[str, Any]:
        return {
            "goal": goal_id,
            "objective": HOSTILE,
            "phase": HOSTILE,
            "run_status": "blocked",
            "detail": HOSTILE,
            "generation": 1,
            "attempt": 1,
            "version": 3,
            "delivery": HOSTILE,
            "decision": {
                "decision": HOSTILE,
                "generation": 1,
                "manifest": HOSTILE,
                "feedback": HOSTILE,
            },
            "candidates": [{"generation": 1, "state": HOSTILE, "frozen": HOSTILE}],
            "evidence": [
                {"check": HOSTILE, "exit_status": 1, "duration_s": 0.1, "frozen": HOSTILE}
            ],
            "decisions": [
                {"ordinal": 1, "node": HOSTILE, "decision": HOSTILE, "manifest": HOSTILE}
            ],
        }


def test_hostile_strings_are_escaped_on_every_page(site: Site, tmp_path: Path) -> None:
    hostile = site.start(HOSTILE)
    secret = add_token(site.tokens_path, "operator", HOSTILE[:120])
    app = create_app(
        site.host, tokens=load_tokens(site.tokens_path), goals=Goals(), executors=EXECUTORS
    )

    async def script(client: httpx.AsyncClient) -> None:
        login_page = await client.get("/login", params={"next": HOSTILE})
        assert_clean(login_page.text)
        await login(client, secret)
        pages = [
            "/",
            f"/?status={quote(HOSTILE)}",
            f"/deliveries/{hostile}",
            f"/deliveries/{hostile}?verify=1",
            "/goals/g-1",
            f"/deliveries/{quote(HOSTILE, safe='')}",
            f"/goals/{quote(HOSTILE, safe='')}",
        ]
        for path in pages:
            response = await client.get(path)
            assert response.headers["content-type"].startswith("text/html"), path
            assert_clean(response.text)
        page = (await client.get(f"/deliveries/{hostile}")).text
        assert "&lt;script&gt;alert(" in page and "\\x1b" in page and "\\u202e" in page
        csrf = csrf_of(page)
        confirm = await client.post(
            f"/deliveries/{hostile}/directive",
            data={"csrf": csrf, "directive": "stop", "reason": HOSTILE},
        )
        assert_clean(confirm.text)
        nonsense = await client.post(
            f"/deliveries/{hostile}/answer",
            data={"csrf": csrf, "correlation": HOSTILE, "response": HOSTILE},
        )
        assert nonsense.status_code == 403  # an operator may not answer questions
        assert_clean(nonsense.text)

    browse(site, script, app)


def test_without_tokens_the_local_user_gets_a_session_on_loopback(site: Site) -> None:
    app = create_app(site.host, tokens=None, executors=EXECUTORS)

    async def script(client: httpx.AsyncClient) -> None:
        page = await client.get("/")
        assert page.status_code == 200 and "set-cookie" in page.headers
        assert (await client.get("/login")).status_code == 303

    browse(site, script, app)


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/\\evil"])
def test_login_never_redirects_off_site(site: Site, target: str) -> None:
    async def script(client: httpx.AsyncClient) -> None:
        csrf = csrf_of((await client.get("/login")).text)
        data = {"token": site.secrets["viewer"], "next": target, "csrf": csrf}
        reply = await client.post("/login", data=data)
        assert reply.headers["location"] == "/"

    browse(site, script)


def test_the_login_form_carries_a_csrf_token_bound_to_a_pre_session_cookie(site: Site) -> None:
    token = site.secrets["viewer"]

    async def script(client: httpx.AsyncClient) -> None:
        form = await client.get("/login")
        cookie = form.headers["set-cookie"].lower()
        assert cookie.startswith("execsys_login=") and "httponly" in cookie
        assert "samesite=strict" in cookie and "path=/login" in cookie
        csrf = csrf_of(form.text)
        assert client.cookies.get("execsys_login") == csrf
        # A forged post: right token, but the form's CSRF field is not the cookie's.
        forged = await client.post("/login", data={"token": token, "csrf": csrf[::-1]})
        assert forged.status_code == 403 and "CSRF_INVALID" in forged.text
        assert "execsys_session" not in forged.headers.get("set-cookie", "")
        missing = await client.post("/login", data={"token": token})
        assert missing.status_code == 403
        # The refusal served a new form with a new token: the old one is spent.
        fresh = csrf_of(missing.text)
        assert fresh != csrf and client.cookies.get("execsys_login") == fresh
        ok = await client.post("/login", data={"token": token, "csrf": fresh})
        assert ok.status_code == 303 and "execsys_session=" in ok.headers["set-cookie"]
        assert (await client.get("/")).status_code == 200

    async def cross_site(client: httpx.AsyncClient) -> None:
        # Another site can copy a form's field but cannot make the browser send the cookie.
        csrf = csrf_of((await client.get("/login")).text)
        client.cookies.clear()
        replayed = await client.post("/login", data={"token": token, "csrf": csrf})
        assert replayed.status_code == 403
        assert "execsys_session" not in replayed.headers.get("set-cookie", "")

    browse(site, script)
    browse(site, cross_site)


def test_a_delivery_page_lists_the_latest_events_unless_asked_for_all() -> None:
    from execution_system.web._console import TIMELINE_ROWS, timeline

    lines = [b"{}"] + [f'{{"ordinal": {n}, "node": "n"}}'.encode() for n in range(1, 251)]
    latest = timeline(lines)
    assert len(latest) == TIMELINE_ROWS == 100
    assert [r["ordinal"] for r in latest] == list(range(151, 251))
    assert [r["ordinal"] for r in timeline(lines, None)] == list(range(1, 251))
