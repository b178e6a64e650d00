"""The CodeClosure control graph: seven phases as nodes, one graph per goal's checks.

The topology is fixed; only EVIDENCE_BUILD's branches (one per check of the
goal) vary, which is why the graph is rendered from the goal and then
admitted like any other spec. Capability matrix, enforced by custody:

======================  ==========  =========================================
node                    workspace   notes
======================  ==========  =========================================
DISCOVERY, PLAN         read        proposals only
IMPLEMENT               write       everything but the protected paths
SOURCE_FREEZE           read        runtime agent; freezes the candidate digest
check_<name>            read        runs in a scratch copy of the frozen tree
FINAL_VERIFY            —           Host operation over one manifest
DECISION                —           a decision wait (maintainer)
REEVALUATE, CLOSEOUT    —           Host operations
======================  ==========  =========================================

No path reaches CLOSEOUT but through an ACCEPT route case, and CLOSEOUT
itself refuses unless the current decision is ACCEPT for the current digest.
"""

from __future__ import annotations

import sys
from typing import Any

from contracts import CommandBinding, ExecutorBinding
from execution_system.codeclosure._goal import AgentWorker, CommandWorker, Goal
from execution_system.codeclosure._source import EXCLUDE_ENV

DECISIONS = ["ACCEPT", "REJECT_REPAIRABLE", "REJECT_BLOCKED", "NEEDS_DECISION", "ENGINE_ERROR"]
DIGEST = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
EVIDENCE = {
    "type": "object",
    "properties": {
        "check": {"type": "string"},
        "exit_status": {"type": "integer"},
        "output_digest": DIGEST,
        "duration_s": {"type": "number", "minimum": 0},
        "frozen": DIGEST,
        "spec": DIGEST,
        "tail": {"type": "string"},
        "tests": {"type": ["object", "null"]},
        "base_tests": {"type": ["object", "null"]},
        "shadows": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["check", "exit_status", "output_digest", "duration_s", "frozen", "spec"],
    "additionalProperties": False,
}
PHASES = (
    "DISCOVERY",
    "PLAN",
    "IMPLEMENT",
    "SOURCE_FREEZE",
    "EVIDENCE_BUILD",
    "FINAL_VERIFY",
    "CLOSEOUT",
)


def check_node(name: str) -> str:
    """The node id of a check."""
    return f"check_{name}"


def render(goal: Goal) -> dict[str, Any]:
    """The control-graph document for ``goal``."""
    checks = list(goal.checks)
    nodes: dict[str, Any] = {
        "DISCOVERY": {
            "kind": "action",
            "executor": "discovery",
            "workspace": "read",
            "inputs": {"objective": "input.objective", "checks": "input.checks"},
            "outputs": {"facts": {"type": "object"}},
            "next": "PLAN",
        },
        "PLAN": {
            "kind": "action",
            "executor": "planner",
            "workspace": "read",
            "inputs": {
                "objective": "input.objective",
                "criteria": "input.criteria",
                "checks": "input.check_names",
                "required": "input.required",
                "facts": "DISCOVERY.facts",
            },
            "outputs": {
                "obligations": {
                    "type": "array",
                    "items": {"enum": [check_node(c) for c in checks]},
                    "minItems": 1,
                    "uniqueItems": True,
                },
                "plan": {"type": "string"},
            },
            "next": "IMPLEMENT",
        },
        "IMPLEMENT": {
            "kind": "action",
            "executor": "worker",
            "workspace": "write",
            "protect": list(goal.protected),
            "inputs": {
                "objective": "input.objective",
                "plan": "PLAN.plan",
                "worker": "input.worker",
                "criteria": "input.criteria",
                "protected": "input.protected",
                "feedback": "FINAL_VERIFY.feedback?",
            },
            "outputs": {"summary": {"type": "string"}},
            "max_visits": goal.max_generations,
            "next": "SOURCE_FREEZE",
        },
        "SOURCE_FREEZE": {
            "kind": "action",
            "executor": "freeze",
            "workspace": "read",
            "inputs": {"protected": "input.protected"},
            "outputs": {
                "frozen": DIGEST,
                "files": {"type": "integer", "minimum": 0},
                "protected": {"type": "object", "additionalProperties": DIGEST},
            },
            "max_visits": goal.max_generations,
            "next": "EVIDENCE_BUILD",
        },
        "EVIDENCE_BUILD": {
            "kind": "parallel",
            "branches": [check_node(c) for c in checks],
            "select": "PLAN.obligations",
            "required": [check_node(c) for c in goal.required],
            "barrier": "EVIDENCE_JOIN",
            "max_visits": goal.max_generations,
        },
        "EVIDENCE_JOIN": {
            "kind": "barrier",
            "next": "FINAL_VERIFY",
            "max_visits": goal.max_generations,
        },
        "FINAL_VERIFY": {
            "kind": "operation",
            "operation": "codeclosure.accept",
            "inputs": {
                "revision": "input.revision",
                "frozen": "SOURCE_FREEZE.frozen",
                "required": "input.required",
                "specs": "input.specs",
                "max_generations": "input.max_generations",
                "allow_fewer": "input.allow_fewer",
                "protected": "SOURCE_FREEZE.protected",
                **{
                    f"ev_{c}": f"{check_node(c)}.evidence" + ("" if c in goal.required else "?")
                    for c in checks
                },
            },
            "outputs": {
                "decision": {"enum": DECISIONS},
                "manifest": DIGEST,
                "frozen": DIGEST,
                "generation": {"type": "integer"},
                "feedback": {"type": "string"},
            },
            "routes": {
                "port": "decision",
                "cases": {
                    "ACCEPT": "CLOSEOUT",
                    "REJECT_REPAIRABLE": "IMPLEMENT",
                    "NEEDS_DECISION": "DECISION",
                    "REJECT_BLOCKED": "BLOCKED",
                    "ENGINE_ERROR": "FAILED",
                },
            },
            "max_visits": goal.max_generations,
        },
        "DECISION": {
            "kind": "wait",
            "wait": "decision",
            "result": {
                "type": "object",
                "properties": {"accept": {"type": "boolean"}, "note": {"type": "string"}},
                "required": ["accept"],
                "additionalProperties": False,
            },
            "authority": {"roles": ["maintainer"], "min_count": 1},
            "next": "REEVALUATE",
            "max_visits": goal.max_generations,
        },
        "REEVALUATE": {
            "kind": "operation",
            "operation": "codeclosure.reevaluate",
            "inputs": {"accept": "DECISION.accept", "manifest": "FINAL_VERIFY.manifest"},
            "outputs": {"decision": {"enum": ["ACCEPT", "REJECT_BLOCKED"]}, "manifest": DIGEST},
            "routes": {
                "port": "decision",
                "cases": {"ACCEPT": "CLOSEOUT", "REJECT_BLOCKED": "BLOCKED"},
            },
            "max_visits": goal.max_generations,
        },
        "CLOSEOUT": {
            "kind": "operation",
            "operation": "codeclosure.closeout",
            "inputs": {
                "verdict": "FINAL_VERIFY.decision",
                "reverdict": "REEVALUATE.decision?",
                "manifest": "FINAL_VERIFY.manifest",
                "accepted": "FINAL_VERIFY.frozen",
                "frozen": "SOURCE_FREEZE.frozen",
            },
            "outputs": {"closed": {"const": True}, "manifest": DIGEST, "frozen": DIGEST},
            "next": "CLOSED",
        },
        "CLOSED": {"kind": "terminal", "outcome": "succeeded"},
        "BLOCKED": {"kind": "terminal", "outcome": "blocked"},
        "FAILED": {"kind": "terminal", "outcome": "failed"},
    }
    for name in checks:
        nodes[check_node(name)] = {
            "kind": "action",
            "executor": check_node(name),
            "workspace": "read",
            "inputs": {
                "frozen": "SOURCE_FREEZE.frozen",
                "checks": "input.checks",
                "facts": "DISCOVERY.facts",
            },
            "outputs": {"evidence": EVIDENCE},
            "next": "EVIDENCE_JOIN",
        }
    return {
        "spec": "execution-system/v1",
        "graph": "codeclosure",
        "description": f"CodeClosure for goal {goal.id}",
        "input": {
            "type": "object",
            "properties": {name: {} for name in delivery_input(goal)},
            "required": sorted(delivery_input(goal)),
        },
        "start": "DISCOVERY",
        "nodes": nodes,
    }


def delivery_input(goal: Goal) -> dict[str, Any]:
    """The delivery input: everything the phases read of the goal."""
    return {
        "goal": goal.id,
        "revision": goal.revision,
        "objective": goal.objective,
        "criteria": list(goal.criteria),
        "check_names": list(goal.checks),
        "checks": {name: list(argv) for name, argv in goal.checks.items()},
        "specs": {name: goal.spec_digest(name) for name in goal.checks},
        "required": list(goal.required),
        "max_generations": goal.max_generations,
        "protected": list(goal.protected),
        "allow_fewer": list(goal.allow_fewer),
        "worker": goal.worker.model_dump(mode="json"),
    }


def _agent(role: str, *extra: str) -> CommandBinding:
    return CommandBinding(
        command=(sys.executable, "-m", "execution_system.codeclosure.agents", role, *extra),
        timeout_s=1800.0,
    )


def executors(goal: Goal) -> dict[str, ExecutorBinding]:
    """Executor bindings: runtime agents, plus the goal's worker for IMPLEMENT.

    The runtime's roles get the goal's own excluded folders in their environment
    (``EXECSYS_EXCLUDE``), so every digest they take leaves out what custody does.
    """
    env = {EXCLUDE_ENV: ",".join(goal.exclude)} if goal.exclude else {}

    def agent(role: str, *extra: str, timeout_s: float = 1800.0) -> CommandBinding:
        return CommandBinding(command=_agent(role, *extra).command, timeout_s=timeout_s, env=env)

    bindings: dict[str, ExecutorBinding] = {
        "discovery": agent("discovery"),
        "planner": agent("planner"),
        "freeze": agent("freeze"),
        **{check_node(name): agent("check", name) for name in goal.checks},
    }
    worker = goal.worker
    if isinstance(worker, CommandWorker):
        bindings["worker"] = CommandBinding(command=worker.argv, timeout_s=worker.timeout_s)
    elif isinstance(worker, AgentWorker):
        # The adapter's own deadline is the agent's; give the turn a little more.
        bindings["worker"] = agent("agent", timeout_s=worker.timeout_s + 60.0)
    else:
        bindings["worker"] = agent("patch")
    return bindings
