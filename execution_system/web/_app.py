"""The one ASGI application: the API, the console, its assets, ``/metrics``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from contracts import ErrorCode, ExecsysError, ExecutorBinding, error
from execution_system.web._api import api_routes, endpoint, error_response, state_of
from execution_system.web._auth import Action, Principal
from execution_system.web._console import HERE, console_routes, page
from execution_system.web._state import GoalSource, RunnerSource, WebState
from execution_system.web._tokens import Tokens
from host import CoordinatorHost

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


class _SecurityHeaders:
    """Adds the CSP and friends to every response (no page may opt out)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        static = scope["path"].startswith("/static/")

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in _HEADERS if k not in present]
                if static and message.get("status") == 200:
                    # Pages name assets with a content version (?v=): no revalidation.
                    extra.append((b"cache-control", b"public, max-age=86400, immutable"))
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, sending)


async def _metrics(request: Request, state: WebState, who: Principal) -> Response:
    who.require(Action.READ)
    # A first scrape reads every journal once: off the event loop, which keeps serving.
    body = await asyncio.to_thread(state.metrics.render)
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


def _metrics_route() -> Route:
    protected = endpoint("metrics", _metrics, cookie=False)

    async def handler(request: Request) -> Response:
        state = state_of(request)
        if state.loopback:  # scrapers on the same machine need no token
            return await _metrics(request, state, state.local)
        return await protected(request)

    return Route("/metrics", handler, methods=["GET"])


def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    problem: ExecsysError
    if status == 405:
        problem = error(
            ErrorCode.WEB_METHOD_NOT_ALLOWED,
            f"{request.method} is not allowed here",
            path=request.url.path,
            expected="a method listed in /api/v1/openapi.json",
        )
    else:
        problem = error(
            ErrorCode.WEB_NOT_FOUND,
            "no such page or endpoint",
            path=request.url.path,
            expected="a path listed in /api/v1/openapi.json, or a console page",
        )
    if request.url.path.startswith("/api/") or "text/html" not in request.headers.get("accept", ""):
        response: Response = error_response(problem)
    else:
        response = page(request, "error.html", 404 if status != 405 else 405, problem=problem)
    if status == 405 and isinstance(exc, HTTPException) and exc.headers:
        response.headers["Allow"] = exc.headers.get("Allow", "")
    return response


async def _http_exception(request: Request, exc: Exception) -> Response:
    return _http_error(request, exc)


def create_app(
    host: CoordinatorHost,
    *,
    tokens: Tokens | None = None,
    goals: GoalSource | None = None,
    executors: Mapping[str, ExecutorBinding] | None = None,
    loopback: bool = True,
    poll_s: float = 0.25,
    runners: RunnerSource | None = None,
) -> Starlette:
    """The ASGI app over ``host``; ``tokens=None`` means every caller is the local user.

    ``loopback`` says the server listens only on a loopback address; without
    it ``tokens`` is required (``execsys web`` refuses to start otherwise).
    ``runners`` lists the runner processes serving the store (``GET /runners``,
    ``execsys_runners_alive``); without it, this server's own process is the one.
    """
    if tokens is None and not loopback:
        raise error(
            ErrorCode.WEB_LISTEN_REFUSED,
            "listening beyond loopback needs a tokens file",
            path="--listen",
            expected="--tokens FILE, or a loopback address such as 127.0.0.1",
        )
    state = WebState(
        host=host,
        tokens=tokens,
        goals=goals,
        executors=dict(executors or {}),
        loopback=loopback,
        poll_s=poll_s,
        runners=runners,
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await state.feed.close()

    async def favicon(request: Request) -> Response:
        return Response(status_code=204)

    routes: list[Any] = [
        Mount("/api/v1", routes=api_routes()),
        _metrics_route(),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        Route("/favicon.ico", favicon, methods=["GET"]),
        *console_routes(),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={404: _http_exception, 405: _http_exception},
        lifespan=lifespan,
    )
    app.state.web = state
    app.add_middleware(_SecurityHeaders)
    return app
