"""Every legal CodeClosure transition succeeds when its guards hold (seed 001, M1 proof 1)."""

from __future__ import annotations

from typing import Any

from contracts import ScriptedBinding
from execution_system._admission import admit, parse_graph
from execution_system.codeclosure import OPERATIONS, delivery_input, executors, render
from host import OPERATIONS as BUILTIN
from host.journal import verify_lines
from tests.codeclosure.helpers import (
    ACTOR,
    POLICY,
    completed,
    create,
    decisions,
    events,
    goal_of,
    refused,
    started,
)

ALL_OPERATIONS = frozenset({**BUILTIN, **OPERATIONS})
PHASE_ORDER = [
    "DISCOVERY",
    "PLAN",
    "IMPLEMENT",
    "SOURCE_FREEZE",
    "EVIDENCE_BUILD",
    "check_tests",
    "EVIDENCE_JOIN",
    "FINAL_VERIFY",
    "CLOSEOUT",
    "CLOSED",
]


def test_full_run_completes_every_phase_in_order(runtime, sample, aio):
    created = create(runtime, sample, sample.worker("direct"))
    assert (created["version"], created["run_status"], created["phase"]) == (
        1,
        "READY",
        "DISCOVERY",
    )
    view = aio(runtime.start(created["goal"], 1))
    assert view["run_status"] == "CLOSED"
    assert view["phase"] == "CLOSEOUT"
    assert view["version"] == 2
    assert view["decision"]["decision"] == "ACCEPT"
    assert completed(runtime.host, view["delivery"]) == PHASE_ORDER
    verdict = verify_lines(runtime.host.journal_lines(view["delivery"]))
    assert verdict.ok
    [candidate] = view["candidates"]
    assert candidate["state"] == "ACCEPTED"
    # The accepted digest is the frozen one, and the evidence is bound to it.
    report = runtime.audit(created["goal"])
    [evidence] = report["evidence"]
    assert evidence["frozen"] == candidate["frozen"] == report["decisions"][0]["frozen"]
    assert evidence["exit_status"] == 0


def test_repair_loop_makes_a_new_generation_then_accepts(runtime, sample, aio):
    created = create(runtime, sample, sample.worker("wrong", "right"))
    view = aio(runtime.start(created["goal"], 1))
    assert view["run_status"] == "CLOSED"
    assert view["generation"] == 2
    assert decisions(runtime, created["goal"]) == ["REJECT_REPAIRABLE", "ACCEPT"]
    first, second = view["candidates"]
    assert (first["state"], first["decision"]) == ("REJECTED", "REJECT_REPAIRABLE")
    assert (second["state"], second["decision"]) == ("ACCEPTED", "ACCEPT")
    assert first["frozen"] != second["frozen"]
    done = completed(runtime.host, view["delivery"])
    # FINAL_VERIFY -> IMPLEMENT (repair) -> ... -> FINAL_VERIFY -> CLOSEOUT
    assert done.count("IMPLEMENT") == 2
    assert done.count("FINAL_VERIFY") == 2
    assert done.index("CLOSEOUT") > max(i for i, n in enumerate(done) if n == "FINAL_VERIFY")
    assert done.count("CLOSEOUT") == 1


def _needs_decision(runtime: Any, sample: Any, aio: Any) -> dict[str, Any]:
    # A second, non-required check that fails: only a maintainer can accept it.
    checks = {**sample.checks, "lint": ("false",)}
    created = create(runtime, sample, sample.worker("direct"), checks=checks, required=["tests"])
    view = aio(runtime.start(created["goal"], 1, authority=POLICY))
    assert view["run_status"] == "WAITING_FOR_INPUT"
    assert view["wait"] == {"node": "DECISION", "kind": "decision"}
    assert view["decision"]["decision"] == "NEEDS_DECISION"
    assert "CLOSEOUT" not in started(runtime.host, view["delivery"])
    return view


def test_needs_decision_accepted_by_a_maintainer_closes(runtime, sample, aio):
    view = _needs_decision(runtime, sample, aio)
    # bob holds no maintainer role: refused, nothing moves
    with refused("ROLE_NOT_ADMITTED"):
        aio(
            runtime.host.resolve(
                view["delivery"], "DECISION", "bob", "maintainer", {"accept": True}
            )
        )
    assert runtime.view(view["goal"])["run_status"] == "WAITING_FOR_INPUT"
    aio(runtime.host.resolve(view["delivery"], "DECISION", ACTOR, "maintainer", {"accept": True}))
    after = runtime.view(view["goal"])
    assert after["run_status"] == "CLOSED"
    assert after["version"] == view["version"]  # a resolution is not a goal command
    assert decisions(runtime, view["goal"]) == ["NEEDS_DECISION", "ACCEPT"]
    done = completed(runtime.host, view["delivery"])
    assert done[done.index("FINAL_VERIFY") :] == [
        "FINAL_VERIFY",
        "DECISION",
        "REEVALUATE",
        "CLOSEOUT",
        "CLOSED",
    ]


def test_needs_decision_refused_by_a_maintainer_blocks(runtime, sample, aio):
    view = _needs_decision(runtime, sample, aio)
    aio(runtime.host.resolve(view["delivery"], "DECISION", ACTOR, "maintainer", {"accept": False}))
    after = runtime.view(view["goal"])
    assert after["run_status"] == "BLOCKED"
    assert decisions(runtime, view["goal"]) == ["NEEDS_DECISION", "REJECT_BLOCKED"]
    done = completed(runtime.host, view["delivery"])
    assert done[-3:] == ["DECISION", "REEVALUATE", "BLOCKED"]
    assert "CLOSEOUT" not in started(runtime.host, view["delivery"])


def test_reject_blocked_after_max_generations(runtime, sample, aio):
    created = create(runtime, sample, sample.worker("wrong", "wrong2"), max_generations=2)
    view = aio(runtime.start(created["goal"], 1))
    assert view["run_status"] == "BLOCKED"
    assert "REJECT_BLOCKED" in view["detail"]
    assert view["generation"] == 2
    assert decisions(runtime, created["goal"]) == ["REJECT_REPAIRABLE", "REJECT_BLOCKED"]
    assert completed(runtime.host, view["delivery"])[-2:] == ["FINAL_VERIFY", "BLOCKED"]
    assert "CLOSEOUT" not in started(runtime.host, view["delivery"])
    # The Host records the outcome as blocked (resumable under authority), not failed.
    assert runtime.host.inspect(view["delivery"]).outcome == "blocked"


def test_engine_error_routes_to_failed(runtime, sample, aio):
    # The real graph, admitted normally, but the check's evidence is bound to another
    # digest than the one SOURCE_FREEZE recorded: acceptance must say ENGINE_ERROR.
    goal = goal_of(sample, sample.worker("direct"))
    bindings = dict(executors(goal))
    evidence = {
        "check": "tests",
        "exit_status": 0,
        "output_digest": "sha256:" + "0" * 64,
        "duration_s": 0.1,
        "frozen": "sha256:" + "1" * 64,
        "spec": goal.spec_digest("tests"),
    }
    bindings["check_tests"] = ScriptedBinding(
        scripted=({"status": "completed", "output": {"evidence": evidence}},)
    )
    delivery = admit(
        parse_graph(render(goal)),
        delivery_input(goal),
        authority=POLICY,
        executors=bindings,
        operations=ALL_OPERATIONS,
        nonce="engine-error",
    )
    aio(runtime.host.run(delivery, seed=goal.project))
    report = runtime.host.inspect(delivery.delivery_id)
    assert report.status == "failed"
    assert report.outcome == "failed"
    assert completed(runtime.host, delivery.delivery_id)[-2:] == ["FINAL_VERIFY", "FAILED"]
    assert "CLOSEOUT" not in started(runtime.host, delivery.delivery_id)
    [verdict] = [
        e
        for e in events(runtime.host, delivery.delivery_id)
        if e["node"] == "FINAL_VERIFY" and e["transition"] == "work-completed"
    ]
    output = next(
        runtime.host.record(r["digest"]) for r in verdict["refs"] if r["kind"] == "output"
    )
    assert output["decision"] == "ENGINE_ERROR"
    assert "another digest" in output["feedback"]


def test_the_graph_has_exactly_the_documented_decision_routes(sample):
    document = render(goal_of(sample, sample.worker("direct"), checks={"a": ("true",)}))
    nodes = document["nodes"]
    assert nodes["FINAL_VERIFY"]["routes"]["cases"] == {
        "ACCEPT": "CLOSEOUT",
        "REJECT_REPAIRABLE": "IMPLEMENT",
        "NEEDS_DECISION": "DECISION",
        "REJECT_BLOCKED": "BLOCKED",
        "ENGINE_ERROR": "FAILED",
    }
    assert nodes["REEVALUATE"]["routes"]["cases"] == {
        "ACCEPT": "CLOSEOUT",
        "REJECT_BLOCKED": "BLOCKED",
    }
    assert nodes["DECISION"]["authority"]["roles"] == ["maintainer"]
    # The only ways into CLOSEOUT are the two ACCEPT cases.
    into_closeout = [
        (node_id, how)
        for node_id, node in nodes.items()
        for how, target in [("next", node.get("next"))]
        + [(case, t) for case, t in (node.get("routes") or {}).get("cases", {}).items()]
        if target == "CLOSEOUT"
    ]
    assert sorted(into_closeout) == [("FINAL_VERIFY", "ACCEPT"), ("REEVALUATE", "ACCEPT")]
