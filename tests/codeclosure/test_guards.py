"""Direct jumps, worker completions and protected paths are refused (M1 proofs 2, 4, 9)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pytest

from contracts import AdmittedDelivery
from execution_system._admission import admit, parse_graph
from execution_system.codeclosure import (
    OPERATIONS,
    CommandWorker,
    delivery_input,
    executors,
    render,
)
from host import OPERATIONS as BUILTIN
from tests.codeclosure.helpers import (
    CHECK,
    CHECK_PATH,
    POLICY,
    completed,
    create,
    decisions,
    failures,
    goal_of,
    refused,
    snapshot,
    started,
    workspace,
)

ALL_OPERATIONS = frozenset({**BUILTIN, **OPERATIONS})


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(document: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = document["nodes"]
        for key in parents:
            target = target[key]
        target[last] = value

    return edit


JUMPS = {
    "IMPLEMENT->CLOSEOUT": _set("IMPLEMENT.next", "CLOSEOUT"),
    "DISCOVERY->CLOSEOUT": _set("DISCOVERY.next", "CLOSEOUT"),
    "SOURCE_FREEZE->FINAL_VERIFY": _set("SOURCE_FREEZE.next", "FINAL_VERIFY"),
    "NEEDS_DECISION->CLOSEOUT": _set("FINAL_VERIFY.routes.cases.NEEDS_DECISION", "CLOSEOUT"),
    "DECISION->CLOSEOUT": _set("DECISION.next", "CLOSEOUT"),
}


def _admit(goal: Any, document: dict[str, Any], nonce: str) -> AdmittedDelivery:
    return admit(
        parse_graph(document),
        delivery_input(goal),
        authority=POLICY,
        executors=executors(goal),
        operations=ALL_OPERATIONS,
        nonce=nonce,
    )


@pytest.mark.parametrize("jump", sorted(JUMPS))
def test_direct_jumps_are_refused_at_admission(sample, jump):
    goal = goal_of(sample, sample.worker("direct"))
    document = render(goal)
    _admit(goal, document, "control")  # the unedited graph is admitted
    JUMPS[jump](document)
    with refused("GRAPH_UNREACHABLE_NODE"):
        _admit(goal, document, jump)


def test_a_forced_implement_to_closeout_jump_is_refused_at_run_time(runtime, sample, aio):
    goal = goal_of(sample, sample.worker("direct"))
    document = render(goal)
    JUMPS["IMPLEMENT->CLOSEOUT"](document)
    # Skip admission: construct the delivery directly.
    forced = AdmittedDelivery(
        graph=parse_graph(document),
        input=delivery_input(goal),
        authority=POLICY,
        executors=executors(goal),
        nonce="forced",
    )
    aio(runtime.host.run(forced, seed=goal.project))
    d = forced.delivery_id
    assert runtime.host.status(d).status.value == "failed"
    assert "CLOSEOUT" not in completed(runtime.host, d)
    assert "CLOSED" not in started(runtime.host, d)
    assert failures(runtime.host, d) == [("CLOSEOUT", "INPUT_UNAVAILABLE")]


def test_an_admissible_reject_to_closeout_edge_is_refused_by_closeout(runtime, sample, aio):
    # Re-routing a rejection to CLOSEOUT keeps every node reachable, so admission
    # accepts it; CLOSEOUT itself must then refuse a decision that is not ACCEPT.
    goal = goal_of(sample, sample.worker("wrong"))
    document = render(goal)
    _set("FINAL_VERIFY.routes.cases.REJECT_REPAIRABLE", "CLOSEOUT")(document)
    delivery = _admit(goal, document, "reject-to-closeout")
    aio(runtime.host.run(delivery, seed=goal.project))
    d = delivery.delivery_id
    report = runtime.host.inspect(d)
    assert report.status == "failed"
    assert "not ACCEPT" in report.message
    assert failures(runtime.host, d) == [("CLOSEOUT", "OPERATION_FAILED")]
    assert "CLOSED" not in started(runtime.host, d)


@pytest.mark.parametrize(
    "output",
    [{"summary": "x", "decision": "ACCEPT"}, {"summary": "x", "closed": True}],
    ids=["decision", "closed"],
)
def test_a_worker_completion_cannot_enter_closeout(runtime, sample, aio, output):
    script = sample.root / "agent.py"
    reply = {"status": "completed", "output": output}
    script.write_text(
        f"import json, sys\njson.load(sys.stdin)\nprint({json.dumps(json.dumps(reply))})\n"
    )
    created = create(runtime, sample, CommandWorker(argv=(sys.executable, str(script))))
    view = aio(runtime.start(created["goal"], 1))
    assert view["run_status"] == "FAILED"
    assert "OUTPUT_UNDECLARED_PORT" in view["detail"]
    assert failures(runtime.host, view["delivery"]) == [("IMPLEMENT", "OUTPUT_UNDECLARED_PORT")]
    reached = started(runtime.host, view["delivery"])
    assert not reached & {"FINAL_VERIFY", "CLOSEOUT", "CLOSED"}
    assert decisions(runtime, created["goal"]) == []


def test_a_patch_to_the_protected_tests_is_refused(runtime, sample, aio):
    before = snapshot(sample.project)
    created = create(runtime, sample, sample.worker("cheat"))
    view = aio(runtime.start(created["goal"], 1))
    assert view["run_status"] == "FAILED"
    assert view["detail"].startswith(
        "POLICY_VIOLATION (CUSTODY_PROTECTED_PATH): custody refused at tests/check_calc.py"
    )
    assert failures(runtime.host, view["delivery"]) == [("IMPLEMENT", "CUSTODY_PROTECTED_PATH")]
    assert "SOURCE_FREEZE" not in started(runtime.host, view["delivery"])
    assert decisions(runtime, created["goal"]) == []
    # Neither the candidate nor the project keeps the edit.
    assert (workspace(sample, view["delivery"]) / CHECK_PATH).read_text() == CHECK
    assert snapshot(sample.project) == before
