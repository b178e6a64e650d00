"""The JSON API under ``/api/v1``: parse, authorize, call one Host method, render.

Handlers never touch storage: every read and write goes through the Host's
public API (``CoordinatorHost``), as the CLI's do.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from contracts import DeliveryId, DeliveryStatus, ErrorCode, ExecsysError, digest_of, error
from execution_system.web._auth import Action, Principal
from execution_system.web._bodies import (
    AdmitBody,
    AnswerBody,
    RecoverBody,
    ResolveBody,
    RetireBody,
    StopBody,
    check_recover,
    read_body,
)
from execution_system.web._errors import error_body, http_status
from execution_system.web._goals import api_export
from execution_system.web._graph import graph_view
from execution_system.web._openapi import openapi_document
from execution_system.web._state import WebState, audit

Handler = Callable[[Request, WebState, Principal], Awaitable[Response]]

MAX_PAGE = 500


def state_of(request: Request) -> WebState:
    """The app's shared state."""
    found: WebState = request.app.state.web
    return found


def error_response(exc: ExecsysError) -> JSONResponse:
    """An error in the API's one shape, with the status its code maps to."""
    return JSONResponse(error_body(exc), status_code=http_status(exc.code))


def endpoint(
    route: str, handler: Handler, *, mutating: bool = False, cookie: bool = True
) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a handler: authenticate, map errors, count it, audit mutating calls and refusals."""

    async def wrapped(request: Request) -> Response:
        state = state_of(request)
        started = time.perf_counter()
        principal: Principal | None = None
        try:
            # Cookies never authorize a mutating API call: only a bearer token does.
            principal = state.authenticate(request, cookie=cookie and not mutating)
            response = await handler(request, state, principal)
            if mutating:
                audit(principal, route, request.url.path, f"ok {response.status_code}")
                state.feed.poke()
        except ExecsysError as exc:
            response = error_response(exc)
            if exc.code in {ErrorCode.AUTH_REQUIRED, ErrorCode.AUTH_TOKEN_UNKNOWN}:
                response.headers["WWW-Authenticate"] = 'Bearer realm="execsys"'
            if response.status_code in {401, 403}:
                state.metrics.refusals.labels(exc.code.value).inc()
            if mutating or response.status_code in {401, 403}:
                who = principal or Principal("(anonymous)", "none", frozenset())
                audit(who, route, request.url.path, f"refused {exc.code.value}")
        except Exception as exc:  # the boundary: a bug becomes INTERNAL, never a traceback
            internal = error(
                ErrorCode.INTERNAL,
                f"unexpected {type(exc).__name__}".splitlines()[0][:200],
                expected="no internal error; see the server log",
            )
            import logging

            logging.getLogger("execution_system.web").exception("internal error on %s", route)
            response = error_response(internal)
        state.metrics.observe(route, response.status_code, time.perf_counter() - started)
        return response

    return wrapped


def _json(value: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(value, status_code=status)


def _status_document(report: Any) -> dict[str, Any]:
    return {
        **report.public(),
        "graph": report.graph,
        "updated": report.updated,
        "suspensions": [s.model_dump(mode="json") for s in report.suspensions],
    }


def _flag(request: Request, name: str) -> bool | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if raw in {"true", "1"}:
        return True
    if raw in {"false", "0"}:
        return False
    raise error(ErrorCode.USAGE, f"{raw!r} is not a boolean", path=name, expected="true | false")


def _int(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isascii() or not raw.isdigit() or not low <= int(raw) <= high:
        raise error(
            ErrorCode.USAGE, f"{raw!r} is out of range", path=name, expected=f"{low}..{high}"
        )
    return int(raw)


def list_deliveries(state: WebState, request: Request) -> dict[str, Any]:
    """One page of the delivery listing, filtered (shared by the API and the console)."""
    status = request.query_params.get("status") or None
    if status is not None and status not in {s.value for s in DeliveryStatus}:
        raise error(
            ErrorCode.USAGE,
            f"unknown status {status!r}",
            path="status",
            expected=" | ".join(s.value for s in DeliveryStatus),
        )
    graph = request.query_params.get("graph") or None
    attention_only = _flag(request, "needs-directive")
    limit = _int(request, "limit", 50, 1, MAX_PAGE)
    offset = _int(request, "cursor", 0, 0, 10**9)
    if attention_only is None:
        # The common case, paged by the Host itself: no full listing.
        found = state.host.delivery_page(limit=limit, offset=offset, status=status, graph=graph)
        rows = [r.to_json() for r in found.deliveries]
        following = offset + limit if offset + limit < found.total else None
        return {
            "deliveries": rows,
            "total": found.total,
            "next": str(following) if following is not None else None,
            "needs_directive": [],
        }
    attention = {a.delivery: list(a.reasons) for a in state.host.needs_directive()}
    selected = [
        row.to_json()
        for row in state.host.deliveries()
        if (status is None or row.status == status)
        and (graph is None or row.graph == graph)
        and (row.delivery in attention) == attention_only
    ]
    page = selected[offset : offset + limit]
    following = offset + limit if offset + limit < len(selected) else None
    return {
        "deliveries": page,
        "total": len(selected),
        "next": str(following) if following is not None else None,
        "needs_directive": [{"delivery": d, "reasons": r} for d, r in attention.items()],
    }


async def _list(request: Request, state: WebState, who: Principal) -> Response:
    who.require(Action.READ)
    return _json(list_deliveries(state, request))


def _delivery_id(request: Request) -> DeliveryId:
    return DeliveryId(str(request.path_params["delivery"]))


async def _status(request: Request, state: WebState, who: Principal) -> Response:
    delivery = _delivery_id(request)
    who.require(Action.STATUS, delivery)
    return _json(_status_document(state.host.status(delivery)))


async def _inspect(request: Request, state: WebState, who: Principal) -> Response:
    delivery = _delivery_id(request)
    who.require(Action.READ, delivery)
    return _json(state.host.inspect(delivery).to_json())


async def _journal(request: Request, state: WebState, who: Principal) -> Response:
    delivery = _delivery_id(request)
    who.require(Action.READ, delivery)
    lines = state.host.journal_lines(delivery)
    return Response(b"".join(line + b"\n" for line in lines), media_type="application/x-ndjson")


async def _graph(request: Request, state: WebState, who: Principal) -> Response:
    delivery = _delivery_id(request)
    who.require(Action.READ, delivery)
    return _json(graph_view(state.host, delivery))


async def _runners(request: Request, state: WebState, who: Principal) -> Response:
    who.require(Action.READ)
    return _json({"runners": state.runner_rows()})


async def _goals(request: Request, state: WebState, who: Principal) -> Response:
    who.require(Action.READ)
    return _json({"goals": state.goals.list() if state.goals else []})


async def _goal(request: Request, state: WebState, who: Principal) -> Response:
    who.require(Action.READ)
    goal = str(request.path_params["goal"])
    if state.goals is None:
        raise error(ErrorCode.GOAL_NOT_FOUND, "this server serves no goals", path=goal)
    return _json(state.goals.audit(goal))


async def admit_and_run(state: WebState, body: AdmitBody, actor: str) -> Any:
    """Admit a delivery from a request body; run it to its next stop, or queue it for the fleet."""
    from execution_system import admit, parse_authority, parse_graph
    from execution_system._admission import check_graph
    from host import OPERATIONS

    graph = parse_graph(body.spec)
    check_graph(graph, frozenset(OPERATIONS))
    authority = parse_authority(body.authority) if body.authority is not None else None
    delivery = admit(
        graph,
        body.input,
        authority=authority,
        executors=state.executors,
        operations=frozenset(OPERATIONS),
        nonce=digest_of({"key": body.key}) if body.key else uuid.uuid4().hex,
    )
    if state.should_queue(body.queue):
        return await state.host.submit(delivery, created_by=actor)
    return await state.host.run(delivery, created_by=actor)


async def _admit(request: Request, state: WebState, who: Principal) -> Response:
    who.require(Action.ADMIT)
    body = await read_body(request, AdmitBody)
    report = await admit_and_run(state, body, who.actor)
    return _json(_status_document(report), 201)


async def _input(request: Request, state: WebState, who: Principal) -> Response:
    delivery = _delivery_id(request)
    who.require(Action.ANSWER, delivery)
    body = await read_body(request, AnswerBody)
    report = await state.host.answer(
        delivery,
        body.correlation,
        body.response,
        actor=who.actor,
        queue=state.should_queue(body.queue),
    )
    return _json(_status_document(report))


async def _resolve(request: Request, state: WebState, who: Principal) -> Response:
    delivery = _delivery_id(request)
    who.require(Action.RESOLVE, delivery)
    body = await read_body(request, ResolveBody)
    report = await state.host.resolve(
        delivery,
        body.node,
        who.actor,
        body.role,
        body.result,
        queue=state.should_queue(body.queue),
    )
    return _json(_status_document(report))


async def _recover(request: Request, state: WebState, who: Principal) -> Response:
    delivery = _delivery_id(request)
    who.require(Action.RECOVER, delivery)
    body = await read_body(request, RecoverBody)
    check_recover(body)
    report = await state.host.recover(
        delivery,
        body.directive,
        actor=who.actor,
        reason=body.reason,
        node=body.node,
        result=body.result,
        fail=body.fail,
        savepoint=body.savepoint,
        queue=state.should_queue(body.queue),
    )
    return _json(_status_document(report))


async def _stop(request: Request, state: WebState, who: Principal) -> Response:
    delivery = _delivery_id(request)
    who.require(Action.STOP, delivery)
    body = await read_body(request, StopBody, empty_ok=True)
    report = await state.host.stop(delivery, actor=who.actor, wait_s=body.wait_s)
    return _json(_status_document(report))


async def _retire(request: Request, state: WebState, who: Principal) -> Response:
    delivery = _delivery_id(request)
    who.require(Action.RETIRE, delivery)
    body = await read_body(request, RetireBody)
    fact = await state.host.retire(delivery, body.authorization, actor=who.actor)
    return _json(fact.to_json())


def _sse(change: dict[str, Any]) -> bytes:
    return f"event: status\ndata: {json.dumps(change, sort_keys=True)}\n\n".encode()


async def _events(request: Request, state: WebState, who: Principal) -> Response:
    wanted = request.query_params.get("delivery") or None
    if wanted is not None:
        who.require(Action.STATUS, wanted)
    else:
        who.require(Action.READ)
    limit = _int(request, "max_events", 0, 0, 10**6)

    async def stream() -> AsyncIterator[bytes]:
        sent = 0
        yield b": execsys status changes\n\n"
        changes = state.feed.subscribe()
        try:
            while True:
                try:
                    change = await asyncio.wait_for(anext(changes), 15.0)
                except TimeoutError:
                    yield b": keep-alive\n\n"
                    continue
                if wanted is not None and change["delivery"] != wanted:
                    continue
                yield _sse(change)
                sent += 1
                if limit and sent >= limit:
                    return
        finally:
            await changes.aclose()

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _openapi(request: Request, state: WebState, who: Principal) -> Response:
    return _json(openapi_document())


def _public(request: Request) -> Principal:
    return state_of(request).local


def api_routes() -> list[Route]:
    """Every route of ``/api/v1``."""
    read: list[tuple[str, str, Handler]] = [
        ("/deliveries", "list", _list),
        ("/deliveries/{delivery}", "status", _status),
        ("/deliveries/{delivery}/inspect", "inspect", _inspect),
        ("/deliveries/{delivery}/journal", "journal", _journal),
        ("/deliveries/{delivery}/graph", "graph", _graph),
        ("/runners", "runners", _runners),
        ("/goals", "goals", _goals),
        ("/goals/{goal}", "goal", _goal),
        ("/goals/{goal}/export", "goal-export", api_export),
        ("/events", "events", _events),
    ]
    write: list[tuple[str, str, Handler]] = [
        ("/deliveries", "admit", _admit),
        ("/deliveries/{delivery}/input", "input", _input),
        ("/deliveries/{delivery}/resolve", "resolve", _resolve),
        ("/deliveries/{delivery}/recover", "recover", _recover),
        ("/deliveries/{delivery}/stop", "stop", _stop),
        ("/deliveries/{delivery}/retire", "retire", _retire),
    ]
    routes = [
        Route("/openapi.json", _unauthenticated("openapi", _openapi), methods=["GET"]),
    ]
    routes += [Route(p, endpoint(n, h), methods=["GET"], name=n) for p, n, h in read]
    routes += [
        Route(p, endpoint(n, h, mutating=True), methods=["POST"], name=n) for p, n, h in write
    ]
    return routes


def _unauthenticated(route: str, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def wrapped(request: Request) -> Response:
        return await handler(request, state_of(request), _public(request))

    return wrapped
