"""A real store with real deliveries, served by the ASGI app through httpx's ASGITransport."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from contracts import AdmittedDelivery, PythonBinding
from execution_system import admit, parse_authority, parse_graph
from execution_system._compose import open_runner
from execution_system.web import Tokens, add_token, create_app, load_tokens
from runner import Runner

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>\x1b[31m\x00\u202e&amp;\'"'

SPEC: dict[str, Any] = {
    "spec": "execution-system/v1",
    "graph": "web-test",
    "input": {
        "type": "object",
        "properties": {"question": {"type": "string"}},
        "required": ["question"],
    },
    "start": "ask",
    "nodes": {
        "ask": {
            "kind": "action",
            "executor": "asker",
            "inputs": {"question": "input.question"},
            "outputs": {"answer": {"type": "string"}},
            "next": "signoff",
        },
        "signoff": {
            "kind": "wait",
            "wait": "approval",
            "result": {
                "type": "object",
                "properties": {"approved": {"type": "boolean"}},
                "required": ["approved"],
            },
            "authority": {"roles": ["maintainer"]},
            "next": "done",
        },
        "done": {"kind": "terminal", "outcome": "succeeded"},
    },
}
AUTHORITY = {"actors": {"alice": ["maintainer"], "mallory": ["reviewer"]}, "approver": "alice"}
EXECUTORS = {"asker": PythonBinding(python="tests.web.agents:ask", path=str(ROOT))}


def delivery(question: str = "which colour?") -> AdmittedDelivery:
    return admit(
        parse_graph(SPEC),
        {"question": question},
        authority=parse_authority(AUTHORITY),
        executors=EXECUTORS,
        nonce=uuid.uuid4().hex,
    )


@dataclass
class Site:
    """One store, its Host, a tokens file and the app over them."""

    runner: Runner
    tokens_path: Path
    tokens: Tokens
    secrets: dict[str, str] = field(default_factory=dict)
    app: Any = None

    @property
    def host(self) -> Any:
        return self.runner.host

    def start(self, question: str = "which colour?") -> str:
        """A new delivery, suspended on its question."""
        report = asyncio.run(self.host.run(delivery(question)))
        assert report.status.value == "suspended"
        return str(report.delivery)

    def waiting(self) -> str:
        """A new delivery, waiting for its approval."""
        did = self.start()
        correlation = self.host.status(did).suspension.correlation
        assert asyncio.run(self.host.answer(did, correlation, "blue")).status.value == "waiting"
        return did

    def call(
        self,
        method: str,
        path: str,
        role: str | None = None,
        *,
        body: Any = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        sent = dict(headers or {})
        if role is not None:
            sent["Authorization"] = f"Bearer {self.secrets[role]}"
        return asyncio.run(_request(self.app, method, path, sent, body, content))


async def _request(
    app: Any,
    method: str,
    path: str,
    headers: dict[str, str],
    body: Any,
    content: bytes | None,
) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        if body is not None:
            return await client.request(method, path, json=body, headers=headers)
        return await client.request(method, path, content=content, headers=headers)


def make_site(tmp: Path, *, agent_scope: tuple[str, ...] = ()) -> Site:
    runner = open_runner(f"sqlite:///{tmp / 'state.db'}")
    tokens_path = tmp / "tokens.yaml"
    site = Site(runner, tokens_path, Tokens({}))
    first = site.start() if not agent_scope else agent_scope[0]
    for role, actor in (
        ("viewer", "vera"),
        ("operator", "otto"),
        ("approver", "alice"),
        ("outsider", "mallory"),
    ):
        site.secrets[role] = add_token(
            tokens_path, "approver" if role == "outsider" else role, actor
        )
    site.secrets["agent"] = add_token(tokens_path, "agent", "agent-7", (first,))
    site.tokens = load_tokens(tokens_path)
    site.app = create_app(runner.host, tokens=site.tokens, executors=EXECUTORS)
    site.secrets["first"] = first
    return site


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    found = make_site(tmp_path)
    yield found
    found.runner.close()
