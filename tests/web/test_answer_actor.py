"""An answer given over HTTP is journaled with the token's actor; the CLI's stays the Host's."""

from __future__ import annotations

import asyncio
import json

from host.journal import audit_journal
from tests.web.conftest import Site
from tests.web.test_console import browse, csrf_of, login


def _cleared(site: Site, delivery: str) -> dict[str, object]:
    events = [json.loads(line) for line in site.host.journal_lines(delivery)[1:]]
    (cleared,) = [e for e in events if e["transition"] == "block-cleared"]
    return dict(cleared["actor"])


def test_an_agents_answer_is_journaled_with_its_actor(site: Site) -> None:
    did = site.secrets["first"]
    correlation = site.host.status(did).suspension.correlation
    reply = site.call(
        "POST",
        f"/api/v1/deliveries/{did}/input",
        "agent",
        body={"correlation": correlation, "response": "green"},
    )
    assert reply.status_code == 200, reply.text
    assert _cleared(site, did) == {"id": "agent-7", "kind": "automation", "role": None}
    # An answer is not a directive: the audit summary lists none.
    admitted = site.host.admitted(did)
    report = audit_journal(site.host.journal_lines(did), admitted.graph, admitted.authority)
    assert report.ok and report.directives == []


def test_an_answer_from_the_console_is_journaled_with_the_sessions_actor(site: Site) -> None:
    did = site.secrets["first"]
    correlation = site.host.status(did).suspension.correlation

    async def script(client) -> None:  # type: ignore[no-untyped-def]
        await login(client, site.secrets["agent"])
        page = await client.get(f"/deliveries/{did}")
        answered = await client.post(
            f"/deliveries/{did}/answer",
            data={"csrf": csrf_of(page.text), "correlation": correlation, "response": '"red"'},
        )
        assert answered.status_code == 303, answered.text

    browse(site, script)
    assert _cleared(site, did)["id"] == "agent-7"


def test_an_answer_without_an_actor_stays_the_hosts(site: Site) -> None:
    did = site.start()
    correlation = site.host.status(did).suspension.correlation
    asyncio.run(site.host.answer(did, correlation, "blue"))
    assert _cleared(site, did) == {"id": "host", "kind": "automation", "role": None}
