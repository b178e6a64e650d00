"""CodeClosure: a code change carried from goal to evidence-backed closeout on the Host."""

from execution_system.codeclosure._failures import CLASS_OF, RUN_STATUS_OF, FailureClass, RunStatus
from execution_system.codeclosure._goal import CommandWorker, Goal, PatchWorker, parse_check
from execution_system.codeclosure._graph import PHASES, delivery_input, executors, render
from execution_system.codeclosure._operations import OPERATIONS, manifest_of
from execution_system.codeclosure._runtime import GoalRuntime

__all__ = [
    "CLASS_OF",
    "OPERATIONS",
    "PHASES",
    "RUN_STATUS_OF",
    "CommandWorker",
    "FailureClass",
    "Goal",
    "GoalRuntime",
    "PatchWorker",
    "RunStatus",
    "delivery_input",
    "executors",
    "manifest_of",
    "parse_check",
    "render",
]
