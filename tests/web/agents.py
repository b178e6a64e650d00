"""Executors of the web tests: one asks its input's question, then echoes the answer."""

from __future__ import annotations

from typing import Any

from contracts import InvocationRequest


async def ask(request: InvocationRequest) -> dict[str, Any]:
    if request.response is None:
        return {
            "status": "needs-input",
            "question": {"text": request.input.get("question", "?")},
            "session": "s1",
        }
    return {"status": "completed", "output": {"answer": str(request.response)}}
