"""CodeClosure: a code change carried from goal to evidence-backed closeout on the Host.

Names load on first use (PEP 562): every store's runner registers CodeClosure's
operations, and reading commands must not pay for the rest of the package.
"""

import typing as _typing

if _typing.TYPE_CHECKING:
    from execution_system.codeclosure._failures import (
        CLASS_OF,
        RUN_STATUS_OF,
        FailureClass,
        RunStatus,
    )
    from execution_system.codeclosure._goal import (
        DEFAULT_PROTECTED,
        AgentWorker,
        CommandWorker,
        Goal,
        PatchWorker,
        parse_check,
    )
    from execution_system.codeclosure._graph import PHASES, delivery_input, executors, render
    from execution_system.codeclosure._operations import OPERATIONS, manifest_of
    from execution_system.codeclosure._runtime import GoalRuntime

__all__ = [
    "CLASS_OF",
    "DEFAULT_PROTECTED",
    "OPERATIONS",
    "PHASES",
    "RUN_STATUS_OF",
    "AgentWorker",
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

_HOME = {
    "CLASS_OF": "_failures",
    "RUN_STATUS_OF": "_failures",
    "FailureClass": "_failures",
    "RunStatus": "_failures",
    "DEFAULT_PROTECTED": "_goal",
    "AgentWorker": "_goal",
    "CommandWorker": "_goal",
    "Goal": "_goal",
    "PatchWorker": "_goal",
    "parse_check": "_goal",
    "PHASES": "_graph",
    "delivery_input": "_graph",
    "executors": "_graph",
    "render": "_graph",
    "OPERATIONS": "_operations",
    "manifest_of": "_operations",
    "GoalRuntime": "_runtime",
}


def __getattr__(name: str) -> _typing.Any:
    if name in _HOME:
        import importlib

        module = importlib.import_module(f"execution_system.codeclosure.{_HOME[name]}")
        return getattr(module, name)
    raise AttributeError(f"module 'execution_system.codeclosure' has no attribute {name!r}")
