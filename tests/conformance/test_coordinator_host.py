"""Conformance suite for the ``CoordinatorHost`` capability.

Every Host factory must pass it; it talks only to the protocol. Add a factory
to ``FACTORIES`` and the whole suite runs against it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts import (
    AdmittedDelivery,
    AuthorityPolicy,
    ErrorCode,
    ExecsysError,
    InvocationRequest,
    LangGraphHostConfig,
)
from contracts._canonical import canonical_bytes
from host import OPERATIONS, CoordinatorHost, HostFactory
from host.journal import verify_lines
from runner import parse_result
from tests.host.harness import graph_doc, make_delivery
from tests.support.memory_custody import MemoryCustody


def _langgraph(tmp: Path) -> HostFactory:
    from host.langgraph import LangGraphHostFactory

    return LangGraphHostFactory(
        LangGraphHostConfig(engine="langgraph", store=f"sqlite:///{tmp}/state.db")
    )


def _langgraph_postgres(tmp: Path) -> HostFactory:
    from host.langgraph import LangGraphHostFactory
    from tests.postgres.conftest import create_database

    return LangGraphHostFactory(
        LangGraphHostConfig(engine="langgraph", store=create_database(), data_dir=str(tmp))
    )


FACTORIES: dict[str, Callable[[Path], HostFactory]] = {
    "langgraph": _langgraph,
    "langgraph-postgresql": _langgraph_postgres,
}
NEEDS: dict[str, str] = {"langgraph-postgresql": "EXECSYS_TEST_POSTGRES"}
"""Factories that need a server: the environment variable that names it."""


def _params() -> list[Any]:
    return [
        pytest.param(
            name,
            marks=[pytest.mark.skip(reason=f"{NEEDS[name]} is not set")]
            if name in NEEDS and not os.environ.get(NEEDS[name])
            else [],
        )
        for name in sorted(FACTORIES)
    ]


class Executors:
    async def __call__(
        self, request: InvocationRequest, binding: Any, *, capability: str, workspace: str | None
    ) -> Any:
        if request.node == "ask" and request.turn == 1:
            return parse_result({"status": "needs-input", "question": "?", "session": "s"})
        if request.node == "ask":
            return parse_result({"status": "completed", "output": {"v": request.response}})
        return parse_result({"status": "completed", "output": {"v": request.node}})


@pytest.fixture(params=_params())
def host(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CoordinatorHost]:
    created = FACTORIES[request.param](tmp_path).create(
        custody=MemoryCustody(), invoker=Executors(), operations=OPERATIONS
    )
    yield created
    created.close()


GRAPH = graph_doc(
    {
        "ask": {
            "kind": "action",
            "executor": "x",
            "outputs": {"v": {"type": "string"}},
            "next": "approve",
        },
        "approve": {
            "kind": "wait",
            "wait": "approval",
            "result": {
                "type": "object",
                "properties": {"ok": {"type": "boolean"}},
                "required": ["ok"],
            },
            "authority": {"roles": ["maintainer"]},
            "next": "done",
        },
        "done": {"kind": "terminal", "outcome": "succeeded"},
    },
    "ask",
)
POLICY = AuthorityPolicy(actors={"alice": ("maintainer",)}, approver="alice")


def test_a_delivery_runs_suspends_waits_and_completes(host: CoordinatorHost) -> None:
    delivery = make_delivery(GRAPH, authority=POLICY)
    report = asyncio.run(host.run(delivery))
    assert report.status.value == "suspended" and report.suspension is not None
    report = asyncio.run(host.answer(delivery.delivery_id, report.suspension.correlation, "a"))
    assert report.status.value == "waiting" and report.wait is not None
    report = asyncio.run(
        host.resolve(delivery.delivery_id, "approve", "alice", "maintainer", {"ok": True})
    )
    assert (report.status.value, report.outcome) == ("completed", "succeeded")
    assert host.status(delivery.delivery_id) == report


def test_inspection_exposes_the_public_shape(host: CoordinatorHost) -> None:
    delivery = make_delivery(GRAPH, authority=POLICY)
    asyncio.run(host.run(delivery))
    view = host.inspect(delivery.delivery_id).to_json()
    for key in (
        "delivery",
        "status",
        "outcome",
        "suspension",
        "wait",
        "nodes",
        "journal",
        "custody",
        "checkpoint",
        "directives",
    ):
        assert key in view
    assert set(view["nodes"]["ask"]) >= {"state", "attempts", "activations"}
    assert view["nodes"]["ask"]["state"] == "blocked"
    verdict = verify_lines(host.journal_lines(delivery.delivery_id))
    assert verdict.ok and verdict.head == view["journal"]["head"]
    assert [row.delivery for row in host.deliveries()] == [delivery.delivery_id]


def test_the_admitted_document_reads_back_to_the_same_delivery(host: CoordinatorHost) -> None:
    delivery = make_delivery(GRAPH, authority=POLICY)
    asyncio.run(host.run(delivery))
    document = host.delivery_document(delivery.delivery_id)
    again = AdmittedDelivery.model_validate_json(canonical_bytes(document))
    assert again.digest == delivery.digest
    with pytest.raises(ExecsysError) as unknown:
        host.delivery_document("d-000000000000000000000000")
    assert unknown.value.code is ErrorCode.DELIVERY_NOT_FOUND


def test_refusals_carry_their_codes_and_change_nothing(host: CoordinatorHost) -> None:
    delivery = make_delivery(GRAPH, authority=POLICY)
    asyncio.run(host.run(delivery))
    before = host.inspect(delivery.delivery_id)
    for call, code in (
        (host.answer(delivery.delivery_id, "c-unknown", 1), ErrorCode.CORRELATION_UNKNOWN),
        (
            host.resolve(delivery.delivery_id, "approve", "alice", "maintainer", {"ok": True}),
            ErrorCode.WAIT_NOT_PENDING,
        ),
        (host.answer("d-nope", "c", 1), ErrorCode.DELIVERY_NOT_FOUND),
        (host.run(delivery), ErrorCode.DELIVERY_EXISTS),
    ):
        with pytest.raises(ExecsysError) as refused:
            asyncio.run(call)
        assert refused.value.code is code
    assert host.inspect(delivery.delivery_id).journal == before.journal


def test_stop_cancel_and_retire(host: CoordinatorHost) -> None:
    first = make_delivery(GRAPH, authority=POLICY, nonce="1")
    asyncio.run(host.run(first))
    assert asyncio.run(host.stop(first.delivery_id)).status.value == "stopped"
    assert [d.delivery for d in host.needs_directive()] == [first.delivery_id]
    fact = asyncio.run(host.retire(first.delivery_id, "auth-1"))
    assert fact.performed and host.status(first.delivery_id).status.value == "retired"
    second = make_delivery(GRAPH, authority=POLICY, nonce="2")
    asyncio.run(host.run(second))
    assert asyncio.run(host.cancel(second.delivery_id)).status.value == "cancelled"
    with pytest.raises(ExecsysError) as refused:
        asyncio.run(host.recover(second.delivery_id, "continue", reason="x"))
    assert refused.value.code is ErrorCode.DIRECTIVE_NOT_APPLICABLE
