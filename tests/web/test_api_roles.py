"""Every API endpoint x every role: allowed, 401 without a token, 403 for the wrong role."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.web.conftest import AUTHORITY, SPEC, Site

Prepare = Callable[[Site], tuple[str, Any]]


def _read(path: str) -> Prepare:
    return lambda site: (path.replace("{d}", site.secrets["first"]), None)


def _admit(site: Site) -> tuple[str, Any]:
    return "/api/v1/deliveries", {"spec": SPEC, "input": {"question": "q"}, "authority": AUTHORITY}


def _input(site: Site) -> tuple[str, Any]:
    did = site.secrets["first"]
    correlation = site.host.status(did).suspension.correlation
    return f"/api/v1/deliveries/{did}/input", {"correlation": correlation, "response": "red"}


def _resolve(site: Site) -> tuple[str, Any]:
    did = site.waiting()
    body = {"node": "signoff", "role": "maintainer", "result": {"approved": True}}
    return f"/api/v1/deliveries/{did}/resolve", body


def _stopped(site: Site) -> str:
    did = site.waiting()
    assert asyncio.run(site.host.stop(did, actor="setup")).status.value == "stopped"
    return did


def _recover(site: Site) -> tuple[str, Any]:
    body = {"directive": "continue", "reason": "checked the runner"}
    return f"/api/v1/deliveries/{_stopped(site)}/recover", body


def _stop(site: Site) -> tuple[str, Any]:
    return f"/api/v1/deliveries/{site.waiting()}/stop", {}


def _retire(site: Site) -> tuple[str, Any]:
    return f"/api/v1/deliveries/{_stopped(site)}/retire", {"authorization": "chg-42"}


# (method, name, prepare, success status, roles allowed)
ENDPOINTS: list[tuple[str, str, Prepare, int, set[str]]] = [
    ("GET", "list", _read("/api/v1/deliveries"), 200, {"viewer", "operator", "approver"}),
    (
        "GET",
        "status",
        _read("/api/v1/deliveries/{d}"),
        200,
        {"viewer", "operator", "approver", "agent"},
    ),
    (
        "GET",
        "inspect",
        _read("/api/v1/deliveries/{d}/inspect"),
        200,
        {"viewer", "operator", "approver"},
    ),
    (
        "GET",
        "journal",
        _read("/api/v1/deliveries/{d}/journal"),
        200,
        {"viewer", "operator", "approver"},
    ),
    (
        "GET",
        "graph",
        _read("/api/v1/deliveries/{d}/graph"),
        200,
        {"viewer", "operator", "approver"},
    ),
    ("GET", "runners", _read("/api/v1/runners"), 200, {"viewer", "operator", "approver"}),
    ("GET", "goals", _read("/api/v1/goals"), 200, {"viewer", "operator", "approver"}),
    ("GET", "goal", _read("/api/v1/goals/g-1"), 404, {"viewer", "operator", "approver"}),
    (
        "GET",
        "goal-export",
        _read("/api/v1/goals/g-1/export"),
        404,
        {"viewer", "operator", "approver"},
    ),
    ("POST", "admit", _admit, 201, {"operator"}),
    ("POST", "input", _input, 200, {"agent"}),
    ("POST", "resolve", _resolve, 200, {"approver"}),
    ("POST", "recover", _recover, 200, {"operator"}),
    ("POST", "stop", _stop, 200, {"operator"}),
    ("POST", "retire", _retire, 200, {"operator"}),
]
ROLES = ["anonymous", "unknown", "viewer", "operator", "approver", "agent", "agent-elsewhere"]
CASES = [
    pytest.param(method, prepare, ok, allowed, role, id=f"{name}-{role}")
    for method, name, prepare, ok, allowed in ENDPOINTS
    for role in ROLES
]


@pytest.mark.parametrize(("method", "prepare", "ok", "allowed", "role"), CASES)
def test_endpoint_by_role(
    site: Site, method: str, prepare: Prepare, ok: int, allowed: set[str], role: str
) -> None:
    permitted = role in allowed
    if permitted:
        path, body = prepare(site)
    else:
        path, body = _read("/api/v1/deliveries/{d}")(site)[0], None
        path = prepare(site)[0] if method == "GET" else _denied_path(site, prepare)
        body = {} if method == "POST" else None
    headers: dict[str, str] = {}
    token: str | None = None
    if role == "unknown":
        headers["Authorization"] = "Bearer est_not-a-token"
    elif role == "agent-elsewhere":
        # The agent's token, on a delivery outside its scope.
        token = "agent"
        path = path.replace(site.secrets["first"], site.start())
    elif role != "anonymous":
        token = role
    response = site.call(method, path, token, body=body, headers=headers)
    if role in {"anonymous", "unknown"}:
        assert response.status_code == 401, response.text
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        expected = "AUTH_REQUIRED" if role == "anonymous" else "AUTH_TOKEN_UNKNOWN"
        assert response.json()["error"]["code"] == expected
    elif not permitted or role == "agent-elsewhere":
        assert response.status_code == 403, response.text
        assert response.json()["error"]["code"] == "AUTH_FORBIDDEN"
    else:
        assert response.status_code == ok, response.text


def _denied_path(site: Site, prepare: Prepare) -> str:
    # Refused before anything runs, so a path on the first delivery is enough.
    name = {
        _admit: "",
        _input: "/input",
        _resolve: "/resolve",
        _recover: "/recover",
        _stop: "/stop",
        _retire: "/retire",
    }[prepare]
    if not name:
        return "/api/v1/deliveries"
    return f"/api/v1/deliveries/{site.secrets['first']}{name}"


def test_refusals_change_nothing_and_are_logged_with_the_actor(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    did = site.waiting()
    before = site.host.journal_lines(did)
    caplog.set_level("INFO", logger="execution_system.web.audit")
    body = {"node": "signoff", "role": "maintainer", "result": {"approved": True}}
    response = site.call("POST", f"/api/v1/deliveries/{did}/resolve", "viewer", body=body)
    assert response.status_code == 403
    assert site.host.journal_lines(did) == before
    assert any(
        "vera" in r.getMessage() and "AUTH_FORBIDDEN" in r.getMessage() for r in caplog.records
    )


def test_mutating_calls_are_journaled_with_the_tokens_actor(site: Site) -> None:
    did = site.waiting()
    body = {"node": "signoff", "role": "maintainer", "result": {"approved": True}}
    assert (
        site.call("POST", f"/api/v1/deliveries/{did}/resolve", "approver", body=body).json()[
            "status"
        ]
        == "completed"
    )
    actors = {json.loads(line).get("actor", {}).get("id") for line in site.host.journal_lines(did)}
    assert "alice" in actors

    other = site.waiting()
    assert (
        site.call("POST", f"/api/v1/deliveries/{other}/stop", "operator", body={}).status_code
        == 200
    )
    reply = site.call(
        "POST",
        f"/api/v1/deliveries/{other}/recover",
        "operator",
        body={"directive": "continue", "reason": "runner checked"},
    )
    assert reply.status_code == 200, reply.text
    # The Host keeps the directive's actor in what it reports about the delivery.
    assert "otto" in reply.json()["message"], reply.json()


def test_an_approver_the_policy_does_not_admit_is_refused_by_the_host(site: Site) -> None:
    did = site.waiting()
    body = {"node": "signoff", "role": "maintainer", "result": {"approved": True}}
    response = site.call("POST", f"/api/v1/deliveries/{did}/resolve", "outsider", body=body)
    assert response.status_code == 403
    assert response.json()["error"]["code"] in {"ACTOR_NOT_ADMITTED", "ROLE_NOT_ADMITTED"}
    assert site.host.status(did).status.value == "waiting"
