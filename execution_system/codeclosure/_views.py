"""Goal status and audit, derived from the Host's records (never stored as authority).

Four separate dimensions: the *phase* (what kind of work is allowed now), the
*run status* (whether it can progress), the *attempt* (bounded executions of
the phase's node) and the *candidate generation* (IMPLEMENT's activations,
each MUTABLE -> FREEZING -> FROZEN -> ACCEPTED | REJECTED | INVALIDATED).
"""

from __future__ import annotations

import json
from typing import Any, assert_never

from contracts import ErrorCode, ExecsysError, NodeId
from execution_system.codeclosure._export import EXPORTED
from execution_system.codeclosure._failures import RUN_STATUS_OF, RunStatus, classify
from execution_system.codeclosure._graph import PHASES

_PHASE_OF = {
    "EVIDENCE_JOIN": "EVIDENCE_BUILD",
    "DECISION": "FINAL_VERIFY",
    "REEVALUATE": "FINAL_VERIFY",
    "CLOSED": "CLOSEOUT",
}


def phase_of(node: str) -> str | None:
    """The CodeClosure phase a node belongs to (None for outcome terminals)."""
    if node in PHASES:
        return node
    if node.startswith("check_"):
        return "EVIDENCE_BUILD"
    return _PHASE_OF.get(node)


def run_status(
    state: str,
    delivery_status: str | None,
    outcome: str | None,
    failed_code: str | None,
    *,
    runner_lost: str | None = None,
) -> tuple[RunStatus, str]:
    """(run status, detail) from the goal's and its delivery's states.

    A delivery still marked running whose runner holds no live lease any more
    was interrupted: BLOCKED, not RUNNING. ``runner_lost`` says how (see
    :func:`runner_lost`).
    """
    if state == "CANCELLED" or delivery_status == "cancelled":
        return RunStatus.CANCELLED, "cancelled by request (never closed)"
    if delivery_status is None:
        return RunStatus.READY, "created; not started"
    if delivery_status == "completed":
        return RunStatus.CLOSED, "closed with a current ACCEPT"
    if delivery_status in {"suspended", "waiting"}:
        return RunStatus.WAITING_FOR_INPUT, delivery_status
    if delivery_status == "running" and runner_lost == "hung":
        return RunStatus.BLOCKED, (
            "interrupted: its runner stopped renewing its lease (hung, or its machine is down)"
        )
    if delivery_status == "running" and runner_lost:
        return RunStatus.BLOCKED, "interrupted: its runner is gone (killed or crashed)"
    if delivery_status == "running":
        return RunStatus.RUNNING, "running (its runner is alive)"
    if delivery_status in {"stopped", "intervention"}:
        return RunStatus.BLOCKED, f"{delivery_status}: needs a directive"
    if outcome == "blocked":
        return RunStatus.BLOCKED, "REJECT_BLOCKED: the candidate cannot be repaired further"
    failure = classify(failed_code or outcome)
    if failure is None:
        return RunStatus.FAILED, outcome or "failed"
    return RUN_STATUS_OF[failure], f"{failure.value} ({failed_code or outcome})"


def goal_view(row: dict[str, Any], host: Any) -> dict[str, Any]:
    """The ``goal status`` document."""
    goal = row["goal"]
    view: dict[str, Any] = {
        "goal": goal.id,
        "version": row["version"],
        "objective": goal.objective,
        "delivery": row["delivery"],
        "phase": "DISCOVERY",
        "attempt": 0,
        "generation": 0,
        "decision": None,
        "candidates": [],
    }
    if row["delivery"] is None:
        status, detail = run_status(row["state"], None, None, None)
        return {
            **view,
            "notes": list(row.get("notes") or []),
            "run_status": status.value,
            "detail": detail,
            "next": next_action(status, goal.id, row["version"], None),
        }
    view["notes"] = list(row.get("notes") or [])
    try:
        report = host.inspect(row["delivery"])
    except ExecsysError as exc:
        if exc.code != ErrorCode.DELIVERY_NOT_FOUND:
            raise
        # The start failed before the Host recorded the delivery (e.g. seeding).
        why = view["notes"][-1] if view["notes"] else "the start failed before it began"
        return {
            **view,
            "run_status": RunStatus.FAILED.value,
            "detail": why,
            "delivery_status": None,
            "next": "fix the cause shown in detail, then create a new goal",
        }
    events = [json.loads(line) for line in host.journal_lines(row["delivery"])[1:]]
    failed = next(
        (
            e["error"]
            for e in reversed(events)
            if e["transition"] == "work-failed" and e.get("error")
        ),
        None,
    )
    failed_code = failed["code"] if failed else None
    status, detail = run_status(
        row["state"],
        report.status.value,
        report.outcome,
        failed_code if report.status == "failed" else None,
        runner_lost=runner_lost(host, row["delivery"]) if report.status == "running" else None,
    )
    if status is RunStatus.FAILED and failed and failed.get("message"):
        # The executor's own reason (a patch that does not apply, a check that cannot start).
        detail = f"{detail}: {' '.join(str(failed['message']).split())[:300]}"
    phase = "DISCOVERY"
    for event in events:
        found = phase_of(event["node"])
        if found is not None:
            phase = found
    nodes = report.nodes
    node = phase if phase != "EVIDENCE_BUILD" else "EVIDENCE_BUILD"
    decision = _latest_decision(host, events)
    view.update(
        phase=phase,
        run_status=status.value,
        detail=detail,
        attempt=nodes[node].attempts if node in nodes else 0,
        generation=nodes[NodeId("IMPLEMENT")].activations if "IMPLEMENT" in nodes else 0,
        decision=decision,
        candidates=candidates(host, events),
        delivery_status=report.status.value,
        question=report.suspension.model_dump(mode="json") if report.suspension else None,
        wait=report.wait.model_dump(mode="json") if report.wait else None,
        next=next_action(status, goal.id, row["version"], report.outcome),
    )
    exports = [n.removeprefix(EXPORTED) for n in view["notes"] if n.startswith(EXPORTED)]
    view["exported"] = exports[-1] if exports else None
    if exports:
        view["next"] = (
            f"apply it with execsys goal apply {goal.id} --to DIR (exported {exports[-1]})"
        )
    return view


def listed_status(row: dict[str, Any], host: Any) -> str:
    """The run status alone, cheaply (for listings)."""
    if row["delivery"] is None:
        return run_status(row["state"], None, None, None)[0].value
    try:
        report = host.status(row["delivery"])
    except ExecsysError as exc:
        if exc.code != ErrorCode.DELIVERY_NOT_FOUND:
            raise
        return RunStatus.FAILED.value
    status = report.status.value
    failed_code = None
    if status == "failed":
        events = [json.loads(line) for line in host.journal_lines(row["delivery"])[1:]]
        failed_code = next(
            (
                e["error"]["code"]
                for e in reversed(events)
                if e["transition"] == "work-failed" and e.get("error")
            ),
            None,
        )
    lost = runner_lost(host, row["delivery"]) if status == "running" else None
    found, _ = run_status(row["state"], status, report.outcome, failed_code, runner_lost=lost)
    return found.value


def runner_lost(host: Any, delivery: str) -> str | None:
    """How a delivery marked running lost its runner: None while a live runner holds it.

    ``gone``: its runner's process on this machine is dead, or it let go of the
    lease without finishing the step; ``hung``: the lease expired unrenewed,
    which is all another machine can tell of a runner that was killed there.
    """
    state = host.leases.state(delivery)["state"]
    if state == "held":
        return None
    return "hung" if state == "expired" else "gone"


def next_action(status: RunStatus, goal: str, version: int, outcome: str | None) -> str:
    """The next safe action for a goal in ``status``, as a command line or a sentence."""
    resume = f"execsys goal resume {goal} --expected-version {version} --reason TEXT"
    if status is RunStatus.READY:
        return f"execsys goal start {goal} --expected-version {version}"
    if status is RunStatus.RUNNING:
        return f"wait: its runner is alive (execsys goal status {goal})"
    if status is RunStatus.WAITING_FOR_INPUT:
        return "answer the question or decide the wait (shown above)"
    if status is RunStatus.BLOCKED and outcome == "blocked":
        return (
            "none on this goal: no generation left to repair it; "
            f"execsys goal create --from {goal} --max-generations N with another worker or patch"
        )
    if status is RunStatus.BLOCKED:
        return resume
    if status is RunStatus.FAILED:
        return (
            "none on this goal (nothing was accepted; the detail says why); fix the cause, "
            f"then execsys goal create --from {goal} with the fixed worker or patch"
        )
    if status is RunStatus.CANCELLED:
        return "none: a cancelled goal never continues"
    if status is RunStatus.CLOSED:
        return f"execsys goal export {goal} --output FILE, or goal apply {goal} --to DIR"
    assert_never(status)


def _latest_decision(host: Any, events: list[dict[str, Any]]) -> dict[str, Any] | None:
    for event in reversed(events):
        if (
            event["node"] in {"FINAL_VERIFY", "REEVALUATE"}
            and event["transition"] == "work-completed"
        ):
            output = _output(host, event)
            if output is not None:
                return {
                    "node": event["node"],
                    "generation": output.get("generation"),
                    "decision": output["decision"],
                    "manifest": output["manifest"],
                    "feedback": output.get("feedback", ""),
                }
    return None


def _output(host: Any, event: dict[str, Any]) -> dict[str, Any] | None:
    for ref in event.get("refs", []):
        if ref["kind"] == "output":
            value = host.record(ref["digest"])
            return value if isinstance(value, dict) else None
    return None


def candidates(host: Any, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each candidate generation and its state, from the journal."""
    gens: list[dict[str, Any]] = []
    for event in events:
        node, kind = event["node"], event["transition"]
        if node == "IMPLEMENT" and kind == "work-started" and event["attempt"]["sequence"] == 1:
            gens.append(
                {"generation": len(gens) + 1, "state": "MUTABLE", "frozen": None, "decision": None}
            )
        if not gens:
            continue
        current = gens[-1]
        if node == "SOURCE_FREEZE" and kind == "work-started":
            current["state"] = "FREEZING"
        elif node == "SOURCE_FREEZE" and kind == "work-completed":
            current["state"] = "FROZEN"
            current["frozen"] = (_output(host, event) or {}).get("frozen")
        elif node == "SOURCE_FREEZE" and kind == "work-invalidated":
            current["state"] = "INVALIDATED"
        elif node in {"FINAL_VERIFY", "REEVALUATE"} and kind == "work-completed":
            decided = (_output(host, event) or {}).get("decision")
            current["decision"] = decided
            if decided in {"REJECT_REPAIRABLE", "REJECT_BLOCKED", "ENGINE_ERROR"}:
                current["state"] = "REJECTED"
        elif node == "CLOSEOUT" and kind == "work-completed":
            current["state"] = "ACCEPTED"
        elif (
            kind == "work-failed"
            and (event.get("error") or {}).get("code") == "CUSTODY_WRITE_UNDER_READ"
            and current["state"] == "FROZEN"
        ):
            current["state"] = "INVALIDATED"
    return gens


def audit(row: dict[str, Any], host: Any) -> dict[str, Any]:
    """The ``goal audit`` document: the journal in readable form, and every decision."""
    view = goal_view(row, host)
    if row["delivery"] is None or view.get("delivery_status", "") is None:
        return {**view, "journal": [], "decisions": [], "evidence": []}
    events = [json.loads(line) for line in host.journal_lines(row["delivery"])[1:]]
    journal = [
        {
            "ordinal": e["ordinal"],
            "node": e["node"],
            "activation": e["activation"],
            "transition": e["transition"],
            "state": e["result_state"],
            "actor": e["actor"]["id"],
            "time": e["time"],
            "error": (e.get("error") or {}).get("code"),
            "reason": (e.get("error") or {}).get("message"),
        }
        for e in events
    ]
    decisions, evidence = [], []
    for event in events:
        if event["transition"] != "work-completed":
            continue
        output = _output(host, event)
        if output is None:
            continue
        if event["node"] in {"FINAL_VERIFY", "REEVALUATE"}:
            decisions.append({"node": event["node"], "ordinal": event["ordinal"], **output})
        if event["node"].startswith("check_"):
            evidence.append({"ordinal": event["ordinal"], **output["evidence"]})
    return {**view, "journal": journal, "decisions": decisions, "evidence": evidence}
