"""Property: whatever valid graph the Host runs, the bundle it exports audits clean."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from contracts import AuthorityPolicy, InvocationRequest
from host.journal import audit_bundle
from tests.audit.make_fixtures import export
from tests.host.harness import Harness, make_delivery, reply
from tests.strategies import control_graphs, instance_of, minimal_input

ROLES = ("maintainer", "lead", "qa")
POLICY = AuthorityPolicy(actors={f"a{i}": ROLES for i in (1, 2, 3)}, approver="a1")


def _value(schema: Any, turn: int) -> Any:
    if isinstance(schema, dict) and "enum" in schema:
        return schema["enum"][turn % len(schema["enum"])]
    if isinstance(schema, dict) and schema.get("type") == "array":
        items = schema.get("items")
        if isinstance(items, dict) and "enum" in items:
            return list(items["enum"])
    return instance_of(schema)


def _behaviour(document: dict[str, Any]) -> Any:
    async def behave(request: InvocationRequest) -> Any:
        node = document["nodes"][request.node]
        outputs = node.get("outputs", {})
        # Route choices vary with the visit, so loops go round and then leave (or hit max_visits).
        return reply({p: _value(s, request.activation) for p, s in outputs.items()})

    return behave


def _drive(h: Harness, document: dict[str, Any]) -> Any:
    delivery = make_delivery(document, minimal_input(document), authority=POLICY)
    report = h.run(delivery)
    approvals: dict[tuple[str, int], int] = {}
    for _ in range(40):
        if report.status.value != "waiting" or report.wait is None:
            break
        nid = report.wait.node
        node = document["nodes"][nid]
        visit = h.inspect(delivery).nodes[nid].activations
        given = approvals.get((nid, visit), 0)
        approvals[(nid, visit)] = given + 1
        props = node["result"].get("properties", {})
        result = {p: _value(s, visit) for p, s in props.items()}
        role = node["authority"]["roles"][0]
        actor = ("a1", "a2", "a3")[given]
        report = asyncio.run(h.host.resolve(delivery.delivery_id, nid, actor, role, result))
    return delivery


@pytest.mark.slow
@pytest.mark.timeout(900)
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(control_graphs(max_segments=4))
def test_host_journals_of_generated_graphs_audit_clean(document: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        behave = _behaviour(document)
        h = Harness(Path(tmp), {name: behave for name in ("planner", "worker", "reviewer")})
        try:
            delivery = _drive(h, document)
            for records in (True, False):
                report = audit_bundle(export(h, delivery, records=records))
                assert report.ok, (report.violations, h.host.status(delivery.delivery_id))
        finally:
            h.close()
