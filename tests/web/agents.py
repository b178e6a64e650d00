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


async def slow(request: InvocationRequest) -> dict[str, Any]:
    """Hangs while its input's marker file exists (so a test can kill its runner mid-step)."""
    import asyncio

    for _ in range(20 * 600):  # at most ten minutes
        if not _hanging(str(request.input.get("hang", ""))):
            break
        await asyncio.sleep(0.05)
    return {"status": "completed", "output": {"done": True}}


def _hanging(marker: str) -> bool:
    from pathlib import Path

    return bool(marker) and Path(marker).exists()


async def pause(request: InvocationRequest) -> dict[str, Any]:
    """Takes 0.3 s, then completes (a step whose latency has a known floor)."""
    import asyncio

    await asyncio.sleep(0.3)
    return {"status": "completed", "output": {"ok": True}}
