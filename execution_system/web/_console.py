"""The operator console: server-rendered pages over the same Host calls as the API.

Pages escape everything (Jinja2 autoescape, control characters made visible),
carry no inline script or style, and every form posts its session's CSRF token.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from contracts import (
    CorrelationId,
    DeliveryId,
    DeliveryStatus,
    ErrorCode,
    ExecsysError,
    NodeId,
    error,
)
from execution_system.web._api import admit_and_run, list_deliveries, state_of
from execution_system.web._auth import Action, Principal, from_entry
from execution_system.web._bodies import RecoverBody, check_recover
from execution_system.web._errors import http_status
from execution_system.web._forms import check_csrf, read_form
from execution_system.web._goals import export_response
from execution_system.web._graph import STATES, graph_view, render_svg
from execution_system.web._state import SESSION_COOKIE, SESSION_TTL_S, Session, WebState, audit
from execution_system.web._tokens import hash_token

HERE = Path(__file__).parent
ASSET_VERSION = hashlib.sha256(
    b"".join((HERE / "static" / name).read_bytes() for name in ("console.css", "console.js"))
).hexdigest()[:12]
"""In the assets' URLs, so a browser may cache them for good: new content, new URL."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def visible(value: Any) -> Any:
    """Show control and bidi-override characters as visible escapes (then HTML-escaped)."""
    if value is None:
        return ""
    if not isinstance(value, str) or isinstance(value, Markup):
        return value  # Markup is ours (the SVG), already escaped
    return _CONTROL.sub(
        lambda m: (
            f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}"
        ),
        value,
    )


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


ENV = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    finalize=visible,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.filters["pretty"] = _pretty
ENV.globals["asset_version"] = ASSET_VERSION
ENV.filters["urlpart"] = lambda v: quote(str(v), safe="")


def page(request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
    """Render a page with the session's principal and CSRF token."""
    session = getattr(request.state, "session", None) or state_of(request).session(request)
    html = ENV.get_template(template).render(
        who=session.principal if session else None,
        csrf=session.csrf if session else "",
        Action=Action,
        **values,
    )
    return HTMLResponse(html, status_code=status)


def _session(request: Request) -> tuple[WebState, Session | None]:
    state = state_of(request)
    found = state.session(request)
    if found is None and state.tokens is None:
        return state, None  # opened by the caller, so its cookie can be set
    return state, found


def _with_cookie(response: Response, sid: str, *, secure: bool) -> Response:
    response.set_cookie(
        SESSION_COOKIE,
        sid,
        max_age=int(SESSION_TTL_S),
        httponly=True,
        samesite="strict",
        secure=secure,
        path="/",
    )
    return response


PageHandler = Callable[[Request, WebState, Principal], Awaitable[Response]]


def console(handler: PageHandler) -> Callable[[Request], Awaitable[Response]]:
    """A console page: a session (or the login page), errors rendered as a page."""

    async def wrapped(request: Request) -> Response:
        state, session = _session(request)
        sid = None
        if session is None:
            if state.tokens is not None:
                return RedirectResponse("/login?next=" + quote(request.url.path), 303)
            sid, session = state.open_session(state.local)
        principal = session.principal
        request.state.session = session
        try:
            response = await handler(request, state, principal)
        except ExecsysError as exc:
            if request.method == "POST":
                audit(principal, "console", request.url.path, f"refused {exc.code.value}")
            response = page(request, "error.html", http_status(exc.code), problem=exc)
        if sid is not None:
            _with_cookie(response, sid, secure=not state.loopback)
        return response

    return wrapped


# --- login ---------------------------------------------------------------------------------


LOGIN_COOKIE = "execsys_login"
"""The pre-session cookie: the login form's CSRF token, sent back with the form (double submit)."""


def _login_page(request: Request, status: int = 200, **values: Any) -> Response:
    """The login form with a fresh CSRF token, in the form and in the pre-session cookie."""
    state = state_of(request)
    token = secrets.token_urlsafe(32)
    response = page(request, "login.html", status, login_csrf=token, **values)
    response.set_cookie(
        LOGIN_COOKIE,
        token,
        max_age=3600,
        httponly=True,
        samesite="strict",
        secure=not state.loopback,
        path="/login",
    )
    return response


async def login_form(request: Request) -> Response:
    """The login page: one field, the token."""
    state = state_of(request)
    if state.tokens is None:
        return RedirectResponse("/", 303)
    return _login_page(request, next=_next(request.query_params.get("next")))


def _next(raw: str | None) -> str:
    # Only a local path: never an open redirect.
    if raw and raw.startswith("/") and not raw.startswith("//") and "\\" not in raw:
        return raw
    return "/"


async def login(request: Request) -> Response:
    """Exchange a token for a session cookie."""
    state = state_of(request)
    if state.tokens is None:
        return RedirectResponse("/", 303)
    form = await read_form(request)
    anonymous = Principal("(anonymous)", "none", frozenset())
    presession = request.cookies.get(LOGIN_COOKIE, "")
    if not presession or not hmac.compare_digest(
        form.get("csrf", "").encode(), presession.encode()
    ):
        # A login form posted from elsewhere (or replayed without its cookie): never a session.
        audit(anonymous, "login", "/login", "refused CSRF_INVALID")
        problem = error(
            ErrorCode.CSRF_INVALID,
            "the login form's CSRF token does not match its cookie",
            path="csrf",
            expected="the login form served by this console (reload /login)",
        )
        return _login_page(request, 403, next=_next(form.get("next")), problem=problem)
    entry = state.tokens.entries.get(hash_token(form.get("token", "").strip()))
    if entry is None:
        audit(anonymous, "login", "/login", "refused")
        problem = error(ErrorCode.AUTH_TOKEN_UNKNOWN, "unknown token", path="token")
        return _login_page(request, 401, next=_next(form.get("next")), problem=problem)
    principal = from_entry(entry)
    sid, _ = state.open_session(principal)
    audit(principal, "login", "/login", "ok")
    response = _with_cookie(
        RedirectResponse(_next(form.get("next")), 303), sid, secure=not state.loopback
    )
    response.delete_cookie(LOGIN_COOKIE, path="/login")
    return response


async def logout(request: Request) -> Response:
    """End the session."""
    state = state_of(request)
    form = await read_form(request)
    session = check_csrf(state.session(request), form)
    for sid, value in list(state.sessions.items()):
        if value is session:
            del state.sessions[sid]
    response = RedirectResponse("/login" if state.tokens is not None else "/", 303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


# --- pages ---------------------------------------------------------------------------------


async def deliveries_page(request: Request, state: WebState, who: Principal) -> Response:
    """Every delivery, those needing a directive on top, with filters."""
    who.require(Action.READ)
    listing = list_deliveries(state, request)
    attention = [item.to_json() for item in state.host.needs_directive()]
    return page(
        request,
        "deliveries.html",
        listing=listing,
        attention=attention,
        filters=dict(request.query_params),
        statuses=_statuses(),
        graphs=sorted({r.graph for r in state.host.deliveries()}),
    )


def _statuses() -> list[str]:
    from contracts import DeliveryStatus

    return [s.value for s in DeliveryStatus]


TIMELINE_ROWS = 100
"""Journal events a delivery page lists unless asked for all (``?events=all``)."""


def timeline(lines: list[bytes], limit: int | None = TIMELINE_ROWS) -> list[dict[str, Any]]:
    """The journal's latest events as rows: ordinal, time, node, transition, actor, attempt.

    ``limit=None`` lists every event.
    """
    rows = []
    for line in lines[1:] if limit is None else lines[1:][-limit:]:
        event = json.loads(line)
        rows.append(
            {
                "ordinal": event.get("ordinal"),
                "time": event.get("time"),
                "node": event.get("node"),
                "activation": event.get("activation"),
                "transition": event.get("transition"),
                "state": event.get("result_state"),
                "actor": (event.get("actor") or {}).get("id"),
                "role": (event.get("actor") or {}).get("role"),
                "attempt": (event.get("attempt") or {}).get("sequence"),
                "error": event.get("error"),
                "rationale": event.get("rationale"),
            }
        )
    return rows


async def delivery_page(request: Request, state: WebState, who: Principal) -> Response:
    """One delivery: diagram, questions, waits, directives, timeline, verification.

    A caller who may only see the delivery's status (an agent) gets the status and
    its pending questions, nothing of the graph or the journal.
    """
    delivery = DeliveryId(str(request.path_params["delivery"]))
    who.require(Action.STATUS, delivery)
    if not who.may(Action.READ, delivery):
        status = state.host.status(delivery)
        brief = {
            **status.public(),
            "graph": status.graph,
            "updated": status.updated,
            "suspensions": [s.model_dump(mode="json") for s in status.suspensions],
            "directives": [],
        }
        return page(
            request,
            "delivery.html",
            report=brief,
            view=None,
            svg=None,
            events=[],
            notice=request.query_params.get("done"),
        )
    inspected = state.host.inspect(delivery)
    report = inspected.to_json()
    if inspected.status is DeliveryStatus.RUNNING:
        # A running delivery whose runner died needs a directive; the Host refuses one
        # (LEASE_HELD) while a live runner still drives it, so offering it is safe.
        report["directives"] = [*inspected.directives, "recover continue", "recover intervene"]
    retired = inspected.status is DeliveryStatus.RETIRED
    lines = state.host.journal_lines(delivery) if not retired else [b"{}"]
    verified = None
    if request.query_params.get("verify") and not retired:
        from host.journal import verify_lines

        verified = verify_lines(lines).to_json()
    every = None if request.query_params.get("events") == "all" else TIMELINE_ROWS
    view = None
    if not retired:
        graph = state.admitted_graph(delivery)
        view = graph_view(state.host, delivery, states=inspected.nodes, lines=lines, graph=graph)
    return page(
        request,
        "delivery.html",
        report=report,
        view=view,
        svg=render_svg(view) if view is not None else None,
        states=STATES,
        events=timeline(lines, every),
        total_events=len(lines) - 1,
        verified=verified,
        notice=request.query_params.get("done"),
        full=True,
    )


async def goal_page(request: Request, state: WebState, who: Principal) -> Response:
    """A CodeClosure goal: phase, generations, evidence, decision."""
    who.require(Action.READ)
    goal = str(request.path_params["goal"])
    if state.goals is None:
        raise error(ErrorCode.GOAL_NOT_FOUND, "this server serves no goals", path=goal)
    return page(request, "goal.html", goal=state.goals.audit(goal))


async def goal_export(request: Request, state: WebState, who: Principal) -> Response:
    """Download a goal's accepted change (the text of ``execsys goal export``)."""
    return export_response(state, who, str(request.path_params["goal"]))


def _json_field(form: dict[str, str], name: str) -> Any:
    raw = form.get(name, "").strip()
    if not raw:
        raise error(ErrorCode.USAGE, f"{name} is empty", path=name, expected="a JSON value")
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise error(
            ErrorCode.PARSE_ERROR, f"not JSON: {exc.msg}", path=name, expected="a JSON value"
        ) from None


def _back(delivery: str, done: str) -> Response:
    return RedirectResponse(f"/deliveries/{quote(delivery, safe='')}?done={quote(done)}", 303)


async def answer_post(request: Request, state: WebState, who: Principal) -> Response:
    """Answer a pending question."""
    delivery = DeliveryId(str(request.path_params["delivery"]))
    form = await read_form(request)
    check_csrf(state.session(request), form)
    who.require(Action.ANSWER, delivery)
    response = _json_field(form, "response")
    report = await state.host.answer(
        delivery,
        CorrelationId(form.get("correlation", "")),
        response,
        actor=who.actor,
        queue=state.should_queue(None),
    )
    audit(who, "input", delivery, f"ok {report.status.value}")
    state.feed.poke()
    return _back(delivery, "answered")


async def resolve_post(request: Request, state: WebState, who: Principal) -> Response:
    """Resolve a pending wait as the session's actor."""
    delivery = DeliveryId(str(request.path_params["delivery"]))
    form = await read_form(request)
    check_csrf(state.session(request), form)
    who.require(Action.RESOLVE, delivery)
    result = _json_field(form, "result")
    report = await state.host.resolve(
        delivery,
        NodeId(form.get("node", "")),
        who.actor,
        form.get("role", ""),
        result,
        queue=state.should_queue(None),
    )
    audit(who, "resolve", delivery, f"ok {report.status.value}")
    state.feed.poke()
    return _back(delivery, "resolved")


_DIRECTIVE_ACTION = {
    "continue": Action.RECOVER,
    "restart-from-savepoint": Action.RECOVER,
    "intervene": Action.RECOVER,
    "stop": Action.STOP,
    "retire": Action.RETIRE,
}


async def directive_post(request: Request, state: WebState, who: Principal) -> Response:
    """A directive: first a confirmation page, then (``confirm=yes``) the directive itself."""
    delivery = DeliveryId(str(request.path_params["delivery"]))
    form = await read_form(request)
    check_csrf(state.session(request), form)
    directive = form.get("directive", "")
    if directive not in _DIRECTIVE_ACTION:
        raise error(
            ErrorCode.USAGE,
            f"unknown directive {directive!r}",
            path="directive",
            expected=" | ".join(_DIRECTIVE_ACTION),
        )
    who.require(_DIRECTIVE_ACTION[directive], delivery)
    reason = form.get("reason", "").strip()
    if not reason:
        raise error(ErrorCode.USAGE, "a directive needs a reason", path="reason", expected="why")
    if form.get("confirm") != "yes":
        return page(request, "confirm.html", delivery=delivery, form=form)
    if directive == "stop":
        report = await state.host.stop(delivery, actor=who.actor)
        outcome = report.status.value
    elif directive == "retire":
        authorization = form.get("authorization", "").strip()
        if not authorization:
            raise error(ErrorCode.USAGE, "retire needs an authorization", path="authorization")
        fact = await state.host.retire(delivery, authorization, actor=who.actor)
        outcome = f"retired {fact.fact}"
    else:
        result = _json_field(form, "result") if form.get("result", "").strip() else None
        body = RecoverBody(
            directive=directive,
            reason=reason,
            savepoint=form.get("savepoint") or None,
            node=form.get("node") or None,
            result=result,
            fail=form.get("fail") == "yes",
        )
        check_recover(body)
        report = await state.host.recover(
            delivery,
            directive,
            actor=who.actor,
            reason=reason,
            node=body.node,
            result=body.result,
            fail=body.fail,
            savepoint=body.savepoint,
            queue=state.should_queue(None),
        )
        outcome = report.status.value
    audit(who, directive, delivery, f"ok {outcome} reason={reason!r}")
    state.feed.poke()
    return _back(delivery, directive)


async def admit_post(request: Request, state: WebState, who: Principal) -> Response:
    """Admit a delivery from a pasted spec (JSON or YAML) and input."""
    from execution_system import parse_document
    from execution_system.web._bodies import AdmitBody

    form = await read_form(request)
    check_csrf(state.session(request), form)
    who.require(Action.ADMIT)
    spec = parse_document(form.get("spec", "").encode(), name="spec")
    value = parse_document(form["input"].encode(), name="input") if form.get("input") else {}
    body = AdmitBody(spec=spec, input=value)
    report = await admit_and_run(state, body, who.actor)
    audit(who, "admit", report.delivery, f"ok {report.status.value}")
    state.feed.poke()
    return _back(report.delivery, "admitted")


def console_routes() -> list[Route]:
    """Every console route."""
    return [
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/", console(deliveries_page), methods=["GET"]),
        Route("/deliveries", console(admit_post), methods=["POST"]),
        Route("/deliveries/{delivery}", console(delivery_page), methods=["GET"]),
        Route("/deliveries/{delivery}/answer", console(answer_post), methods=["POST"]),
        Route("/deliveries/{delivery}/resolve", console(resolve_post), methods=["POST"]),
        Route("/deliveries/{delivery}/directive", console(directive_post), methods=["POST"]),
        Route("/goals/{goal}", console(goal_page), methods=["GET"]),
        Route("/goals/{goal}/export", console(goal_export), methods=["GET"]),
    ]
