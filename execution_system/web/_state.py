"""What every request handler shares: the Host, the tokens, sessions, the feed, metrics."""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.requests import Request

from contracts import ControlGraph, DeliveryId, ErrorCode, ExecutorBinding, error
from execution_system.web._auth import Principal, from_entry, local_principal
from execution_system.web._events import ChangeFeed
from execution_system.web._metrics import WebMetrics
from execution_system.web._tokens import Tokens
from host import CoordinatorHost

AUDIT = logging.getLogger("execution_system.web.audit")
"""Every mutating call and every refusal, one line each, with the caller's actor."""

SESSION_COOKIE = "execsys_session"
SESSION_TTL_S = 8 * 3600.0


class GoalSource(Protocol):
    """The goal views the console and API show (CodeClosure's ``GoalRuntime``)."""

    def list(self) -> list[dict[str, Any]]:
        """Every goal."""
        ...

    def audit(self, goal_id: str) -> dict[str, Any]:
        """A goal's status, journal, evidence and decisions."""
        ...

    def export(self, goal_id: str) -> dict[str, Any]:
        """The accepted change: ``goal``, ``base``, ``frozen``, ``manifest``, ``files``, ``patch``.

        Refuses (GOAL_NOT_ACCEPTED) a goal that has not closed with an accepted change.
        """
        ...


RunnerSource = Callable[[], list[dict[str, Any]]]
"""The runner processes serving the store, one row each (``name``, ``kind``, ``alive``, ...)."""


def own_row(started: float) -> dict[str, Any]:
    """The web server's own runner row (it drives what it does not queue)."""
    return {
        "name": f"web-{os.getpid()}",
        "kind": "web",
        "pid": os.getpid(),
        "started": started,
        "alive": True,
    }


def fleet_source(host: CoordinatorHost) -> RunnerSource:
    """The store's live ``serve`` runners (``CoordinatorHost.runners``), then this server."""
    started = time.time()

    def rows() -> list[dict[str, Any]]:
        fleet = [{**row.to_json(), "kind": "serve", "alive": True} for row in host.runners()]
        return [*fleet, own_row(started)]

    return rows


@dataclass
class Session:
    """A console login."""

    principal: Principal
    csrf: str
    expires: float


@dataclass
class WebState:
    """The application's shared state (one per ASGI app)."""

    host: CoordinatorHost
    tokens: Tokens | None
    goals: GoalSource | None = None
    executors: Mapping[str, ExecutorBinding] = field(default_factory=dict)
    loopback: bool = True
    feed: ChangeFeed = field(init=False)
    metrics: WebMetrics = field(init=False)
    sessions: dict[str, Session] = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    local: Principal = field(default_factory=local_principal)
    poll_s: float = 0.25
    runners: RunnerSource | None = None
    _graphs: dict[str, ControlGraph] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.feed = ChangeFeed(self._changed, interval_s=self.poll_s)
        self.metrics = WebMetrics(self)

    def _changed(self, since: float | None) -> list[dict[str, Any]]:
        page = self.host.delivery_page(limit=1_000_000, changed_since=since)
        return [row.to_json(changed=True) for row in page.deliveries]

    def admitted_graph(self, delivery: DeliveryId) -> ControlGraph:
        """The delivery's admitted graph, remembered: it never changes once admitted."""
        found = self._graphs.get(delivery)
        if found is None:
            found = self.host.admitted(delivery).graph
            if len(self._graphs) >= 256:
                self._graphs.pop(next(iter(self._graphs)))
            self._graphs[delivery] = found
        return found

    def runner_rows(self) -> list[dict[str, Any]]:
        """The runners serving the store: the source given, else this server's process."""
        if self.runners is not None:
            return self.runners()
        return [own_row(self.started)]

    def should_queue(self, asked: bool | None) -> bool:
        """Whether a request's work goes to the fleet's queue instead of running here.

        ``asked`` is the request's own ``queue`` (it wins); without it the work is
        queued exactly when a live ``serve`` runner is listed for the store.
        """
        if asked is not None:
            return asked
        return any(r.get("kind") == "serve" and r.get("alive") for r in self.runner_rows())

    # --- authentication ------------------------------------------------------------------

    def authenticate(self, request: Request, *, cookie: bool) -> Principal:
        """The caller: its bearer token, else (if ``cookie``) its console session."""
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, value = header.partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                raise error(
                    ErrorCode.AUTH_REQUIRED,
                    "the Authorization header is not a bearer token",
                    path="Authorization",
                    expected="Authorization: Bearer TOKEN",
                )
            if self.tokens is None:
                return self.local
            entry = self.tokens.lookup(value.strip())
            if entry is None:
                raise error(ErrorCode.AUTH_TOKEN_UNKNOWN, "unknown token", path="Authorization")
            return from_entry(entry)
        if cookie:
            session = self.session(request)
            if session is not None:
                return session.principal
        if self.tokens is None:
            return self.local
        raise error(
            ErrorCode.AUTH_REQUIRED,
            "no bearer token",
            path="Authorization",
            expected="Authorization: Bearer TOKEN (see 'execsys web token add')",
        )

    def session(self, request: Request) -> Session | None:
        """The console session the request's cookie names, if it is alive."""
        sid = request.cookies.get(SESSION_COOKIE)
        found = self.sessions.get(sid) if sid else None
        if found is None:
            return None
        if found.expires < time.time():
            self.sessions.pop(sid or "", None)
            return None
        return found

    def open_session(self, principal: Principal) -> tuple[str, Session]:
        """Start a console session; return its id (the cookie's value) and the session."""
        now = time.time()
        for sid in [s for s, v in self.sessions.items() if v.expires < now]:
            del self.sessions[sid]
        sid = secrets.token_urlsafe(32)
        found = Session(principal, secrets.token_urlsafe(32), now + SESSION_TTL_S)
        self.sessions[sid] = found
        return sid, found


def audit(principal: Principal, action: str, target: str, outcome: str) -> None:
    """Log one mutating call or refusal."""
    AUDIT.info(
        "actor=%r role=%s action=%s target=%r outcome=%s",
        principal.actor,
        principal.role,
        action,
        target,
        outcome,
    )
