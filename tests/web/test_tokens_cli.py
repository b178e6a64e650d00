"""Tokens file, ``execsys web token add``, listen refusal, the error shape and status mapping."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from contracts import ErrorCode
from execution_system.cli._web import parse_listen
from execution_system.web import create_app, hash_token, http_status, load_tokens
from tests.web.conftest import Site

EXECSYS = [str(Path(sys.executable).with_name("execsys"))]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EXECSYS, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def test_token_add_prints_the_token_once_and_keeps_only_its_hash(tmp_path: Path) -> None:
    done = _cli(
        "web",
        "token",
        "add",
        "--role",
        "viewer",
        "--actor",
        "vera",
        "--tokens",
        str(tmp_path / "t.yaml"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip().splitlines()[-1]
    assert token.startswith("est_") and len(token) > 40
    stored = (tmp_path / "t.yaml").read_text()
    assert token not in stored and hash_token(token) in stored
    assert (tmp_path / "t.yaml").stat().st_mode & 0o077 == 0
    entry = load_tokens(tmp_path / "t.yaml").lookup(token)
    assert entry is not None and (entry.role.value, entry.actor) == ("viewer", "vera")


def test_token_add_json_and_agent_scope(tmp_path: Path) -> None:
    path = str(tmp_path / "t.yaml")
    done = _cli(
        "web",
        "token",
        "add",
        "--role",
        "agent",
        "--actor",
        "bot",
        "--delivery",
        "d-1",
        "--tokens",
        path,
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert set(shown) == {"token", "role", "actor", "delivery"}
    assert shown["delivery"] == "d-1"
    refused = _cli(
        "web", "token", "add", "--role", "agent", "--actor", "bot", "--tokens", path, cwd=tmp_path
    )
    assert refused.returncode == 2
    assert refused.stderr.startswith("execsys: TOKENS_INVALID at --delivery")
    assert "Traceback" not in refused.stderr


def test_a_malformed_tokens_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(
        yaml.safe_dump({"tokens": [{"sha256": "nothex", "role": "viewer", "actor": "v"}]})
    )
    done = _cli("web", "--tokens", str(path), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("execsys: TOKENS_INVALID at ") and done.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "listen", ["0.0.0.0:8780", "192.168.1.9:80", "[::]:8780", "example.org:80"]
)
def test_listening_beyond_loopback_without_tokens_is_refused(tmp_path: Path, listen: str) -> None:
    done = _cli("web", "--listen", listen, "--store", f"sqlite:///{tmp_path}/s.db", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("execsys: WEB_LISTEN_REFUSED at --listen")
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize(
    ("listen", "loopback"),
    [("127.0.0.1:8780", True), ("localhost:1", True), ("[::1]:8780", True), ("10.0.0.1:80", False)],
)
def test_parse_listen(listen: str, loopback: bool) -> None:
    assert parse_listen(listen)[2] is loopback


@pytest.mark.parametrize("listen", ["8780", "127.0.0.1:", "127.0.0.1:99999", ":80"])
def test_malformed_listen(listen: str) -> None:
    with pytest.raises(Exception, match="HOST:PORT"):
        parse_listen(listen)


def test_the_app_itself_refuses_exposure_without_tokens(site: Site) -> None:
    with pytest.raises(Exception, match="tokens"):
        create_app(site.host, tokens=None, loopback=False)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ErrorCode.AUTH_REQUIRED, 401),
        (ErrorCode.AUTH_FORBIDDEN, 403),
        (ErrorCode.DELIVERY_NOT_FOUND, 404),
        (ErrorCode.USAGE, 400),
        (ErrorCode.PARSE_ERROR, 400),
        (ErrorCode.INPUT_INVALID, 422),
        (ErrorCode.GRAPH_NO_TERMINAL, 422),
        (ErrorCode.CORRELATION_STALE, 409),
        (ErrorCode.DELIVERY_NOT_RUNNABLE, 409),
        (ErrorCode.LEASE_HELD, 503),
    ],
)
def test_status_mapping(code: ErrorCode, status: int) -> None:
    assert http_status(code) == status


def test_every_code_maps_to_a_documented_status() -> None:
    for code in ErrorCode:
        assert http_status(code) in {400, 401, 403, 404, 405, 409, 422, 500, 503}
        assert (http_status(code) == 500) == (code is ErrorCode.INTERNAL)


def test_errors_have_the_cli_shape_and_no_trace(site: Site) -> None:
    cases = [
        ("GET", "/api/v1/deliveries/nope", None, 404, "DELIVERY_NOT_FOUND"),
        ("GET", "/api/v1/deliveries?status=bogus", None, 400, "USAGE"),
        ("GET", "/api/v1/deliveries?limit=0", None, 400, "USAGE"),
        ("GET", "/api/v1/nowhere", None, 404, "WEB_NOT_FOUND"),
        ("DELETE", "/api/v1/deliveries", None, 405, "WEB_METHOD_NOT_ALLOWED"),
        ("POST", "/api/v1/deliveries", b"{not json", 400, "PARSE_ERROR"),
        ("POST", "/api/v1/deliveries", b'{"spec": {}, "extra": 1}', 400, "USAGE"),
        ("POST", "/api/v1/deliveries", b'{"spec": {"spec": "execution-system/v1"}}', 422, None),
    ]
    for method, path, content, status, code in cases:
        response = site.call(method, path, "operator", content=content)
        assert response.status_code == status, (path, response.text)
        body = response.json()
        assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "path"}
        if code:
            assert body["error"]["code"] == code
        assert "Traceback" not in response.text


def test_a_stale_correlation_is_a_conflict(site: Site) -> None:
    did = site.secrets["first"]
    body = {"correlation": "c-unknown", "response": "x"}
    response = site.call("POST", f"/api/v1/deliveries/{did}/input", "agent", body=body)
    assert response.status_code == 409, response.text
    assert response.json()["error"]["code"].startswith("CORRELATION_")


def test_journal_endpoint_is_the_export_bytes(site: Site) -> None:
    did = site.secrets["first"]
    response = site.call("GET", f"/api/v1/deliveries/{did}/journal", "viewer")
    assert response.content == b"".join(line + b"\n" for line in site.host.journal_lines(did))


def test_listing_paginates_and_filters(site: Site) -> None:
    for _ in range(3):
        site.start()
    first = site.call("GET", "/api/v1/deliveries?limit=2", "viewer").json()
    assert len(first["deliveries"]) == 2 and first["total"] == 4 and first["next"] == "2"
    rest = site.call("GET", "/api/v1/deliveries?limit=2&cursor=2", "viewer").json()
    assert len(rest["deliveries"]) == 2 and rest["next"] is None
    seen = {r["delivery"] for r in first["deliveries"] + rest["deliveries"]}
    assert len(seen) == 4
    waiting = site.call("GET", "/api/v1/deliveries?status=waiting", "viewer").json()
    assert waiting["total"] == 0
    none = site.call("GET", "/api/v1/deliveries?graph=other", "viewer").json()
    assert none["total"] == 0


def test_graph_endpoint_gives_states_and_path(site: Site) -> None:
    did = site.waiting()
    view = site.call("GET", f"/api/v1/deliveries/{did}/graph", "viewer").json()
    states = {n["id"]: n["state"] for n in view["nodes"]}
    assert states == {"ask": "completed", "signoff": "blocked", "done": "pending"}
    assert view["path"] == ["ask", "signoff"]
    assert {(e["from"], e["to"]) for e in view["edges"]} == {
        ("ask", "signoff"),
        ("signoff", "done"),
    }


def test_openapi_lists_every_route(site: Site) -> None:
    document = site.call("GET", "/api/v1/openapi.json").json()
    routes = {(m.upper(), p) for p, ops in document["paths"].items() for m in ops}
    app_routes = set()
    for mount in site.app.routes:
        if getattr(mount, "path", "") == "/api/v1":
            for route in mount.routes:
                for method in route.methods - {"HEAD"}:
                    path = route.path.replace("{delivery}", "{delivery}")
                    app_routes.add((method, path))
    app_routes.discard(("GET", "/openapi.json"))
    assert routes == app_routes


def test_the_hosts_page_filters_by_change_time(site: Site) -> None:
    first = site.host.delivery_page(limit=10)
    assert first.total == 1 and first.deliveries[0].delivery == site.secrets["first"]
    mark = first.deliveries[0].changed
    later = site.waiting()
    recent = site.host.delivery_page(limit=10, changed_since=mark + 1e-6)
    assert [r.delivery for r in recent.deliveries] == [later]
    assert site.host.delivery_page(limit=10, status="waiting").total == 1
    assert (
        site.host.delivery_page(limit=1, offset=1).deliveries[0].delivery
        == first.deliveries[0].delivery
    )
