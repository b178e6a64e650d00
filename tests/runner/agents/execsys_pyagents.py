"""Python executors for ``test_python_executor.py`` (imported by ``module:function``)."""

from __future__ import annotations

import asyncio
from typing import Any

from contracts import Completed, ErrorCode, Failed, InvocationRequest

CALLS: list[InvocationRequest] = []


async def completed_dict(request: InvocationRequest) -> dict[str, Any]:
    CALLS.append(request)
    return {"status": "completed", "output": {"ticket": request.input["ticket"]}}


async def completed_model(request: InvocationRequest) -> Completed:
    return Completed(output={"turn": request.turn, "node": request.node})


async def needs_input(request: InvocationRequest) -> dict[str, Any]:
    if request.turn == 1:
        return {"status": "needs-input", "question": "which?", "session": "py-s"}
    return {"status": "completed", "output": {"answer": request.response}}


async def failed_model(request: InvocationRequest) -> Failed:
    return Failed(reason="no-capacity", retryable=True, code=ErrorCode.EXECUTOR_RAISED)


async def raises(request: InvocationRequest) -> dict[str, Any]:
    raise RuntimeError("boom in executor")


async def sleeps(request: InvocationRequest) -> dict[str, Any]:
    await asyncio.sleep(60)
    return {"status": "completed", "output": {}}


async def malformed(request: InvocationRequest) -> dict[str, Any]:
    return {"status": "completed", "outputs": {"typo": True}}


async def not_a_dict(request: InvocationRequest) -> object:
    return ["completed"]


async def nan_output(request: InvocationRequest) -> dict[str, Any]:
    return {"status": "completed", "output": {"score": float("nan")}}


async def set_output(request: InvocationRequest) -> dict[str, Any]:
    return {"status": "completed", "output": {"tags": {"a", "b"}}}


def not_async(request: InvocationRequest) -> dict[str, Any]:
    return {"status": "completed", "output": {}}


NOT_CALLABLE = 42
