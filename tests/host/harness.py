"""Test harness: build small graphs, run them on a real Host in a temp store.

Executors are plain async functions per node (a real invoker, not a mock of
the Host); custody is the in-memory one unless a test passes another.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from contracts import (
    AdmittedDelivery,
    AuthorityPolicy,
    Custody,
    ExecutorBinding,
    InvocationRequest,
    InvocationResult,
    LangGraphHostConfig,
    ScriptedBinding,
)
from execution_system import admit, parse_graph
from host import OPERATIONS, InspectReport
from runner import Runner, RunnerFactory, parse_result
from tests.support.memory_custody import MemoryCustody

Behaviour = Callable[[InvocationRequest], Awaitable[Any]]


def reply(output: dict[str, Any]) -> dict[str, Any]:
    return {"status": "completed", "output": output}


def graph_doc(nodes: dict[str, Any], start: str, **extra: Any) -> dict[str, Any]:
    return {"spec": "execution-system/v1", "graph": "t", "start": start, "nodes": nodes, **extra}


def asking_graph() -> dict[str, Any]:
    """One action that asks a question before it answers, then a terminal."""
    return graph_doc(
        {
            "ask": {
                "kind": "action",
                "executor": "ask",
                "outputs": {"ok": {"type": "boolean"}},
                "next": "end",
            },
            "end": {"kind": "terminal", "outcome": "succeeded"},
        },
        "ask",
    )


def looping_graph(steps: int) -> tuple[dict[str, Any], Behaviour]:
    """One action ``step`` that runs ``steps`` times, then a terminal; and its behaviour."""
    step = {
        "kind": "action",
        "executor": "step",
        "outputs": {"go": {"enum": ["again", "stop"]}},
        "routes": {"port": "go", "cases": {"again": "step", "stop": "done"}},
        "max_visits": steps + 1,
    }
    doc = graph_doc({"step": step, "done": {"kind": "terminal", "outcome": "succeeded"}}, "step")

    async def behaviour(request: Any) -> dict[str, Any]:
        return reply({"go": "again" if request.activation < steps else "stop"})

    return doc, behaviour


async def ask_once(request: Any) -> dict[str, Any]:
    """The ``ask`` executor of :func:`asking_graph`: a question on turn 1, then ``ok``."""
    if request.turn == 1:
        return {"status": "needs-input", "question": "go?", "session": "s"}
    return reply({"ok": True})


class ScriptInvoker:
    """Invokes per-executor behaviours and counts every turn it starts."""

    def __init__(self, behaviours: dict[str, Behaviour]) -> None:
        self.behaviours = behaviours
        self.turns: Counter[tuple[str, int, int, int]] = Counter()
        self.calls: list[InvocationRequest] = []

    async def __call__(
        self,
        request: InvocationRequest,
        binding: ExecutorBinding,
        *,
        capability: str,
        workspace: str | None,
    ) -> InvocationResult:
        self.calls.append(request)
        self.turns[(request.node, request.activation, request.attempt, request.turn)] += 1
        assert isinstance(binding, ScriptedBinding)
        name = binding.scripted[0]["executor"]
        return parse_result(await self.behaviours[name](request))


def make_delivery(
    doc: dict[str, Any],
    value: dict[str, Any] | None = None,
    authority: AuthorityPolicy | None = None,
    nonce: str = "n",
    *,
    check: bool = True,
) -> AdmittedDelivery:
    graph = parse_graph(doc)
    executors: dict[str, ExecutorBinding] = {}
    for node in graph.nodes.values():
        name = getattr(node, "executor", None)
        if name:
            executors[name] = ScriptedBinding(scripted=({"executor": name},))
    if not check:
        # A delivery admission would refuse: proves the Host checks again at run time.
        return AdmittedDelivery(graph=graph, input=value or {}, executors=executors, nonce=nonce)
    return admit(
        graph,
        value or {},
        authority=authority,
        executors=executors,
        operations=frozenset(OPERATIONS),
        nonce=nonce,
    )


class Harness:
    """One Host on one temp store."""

    def __init__(
        self, tmp: Path, behaviours: dict[str, Behaviour], custody: Custody | None = None
    ) -> None:
        self.invoker = ScriptInvoker(behaviours)
        self.custody = custody or MemoryCustody()
        config = LangGraphHostConfig(engine="langgraph", store=f"sqlite:///{tmp}/state.db")
        self.runner: Runner = RunnerFactory(config).create(
            custody=self.custody, invoker=self.invoker
        )
        self.host = self.runner.host

    def run(self, delivery: AdmittedDelivery) -> Any:
        return asyncio.run(self.host.run(delivery))

    def inspect(self, delivery: AdmittedDelivery) -> InspectReport:
        return self.host.inspect(delivery.delivery_id)

    def events(self, delivery: AdmittedDelivery) -> list[dict[str, Any]]:
        lines = self.host.store.journal_lines(delivery.delivery_id)  # type: ignore[attr-defined]
        return [json.loads(line) for line in lines[1:]]

    def close(self) -> None:
        self.runner.close()
