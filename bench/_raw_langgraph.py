"""Raw LangGraph baselines for ``host_bench.py``: the same work without the Host.

Every baseline uses the stock ``SqliteSaver`` on a file in the same directory
tree as the Host's store, with the same pragmas (WAL, ``synchronous=FULL``)
and the same ``durability="sync"``. The stock saver has no async methods, so
``AsyncSqliteSaver`` here delegates each one to its synchronous twin, exactly
as the Host's saver does; nothing else is added.
"""

from __future__ import annotations

import asyncio
import itertools
import operator
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

from host.langgraph._async_saver import SyncBackedSaver

RECURSION_LIMIT = 1_000_000


# The same async delegation as the Host's saver: nothing else is added.
AsyncSqliteSaver = SyncBackedSaver


def saver(path: Path) -> AsyncSqliteSaver:
    """A saver on a fresh connection with the Host store's pragmas."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=10.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    s = AsyncSqliteSaver(conn)
    s.setup()
    return s


def config(thread: str) -> dict[str, Any]:
    """Run config for one thread."""
    return {"configurable": {"thread_id": thread}, "recursion_limit": RECURSION_LIMIT}


# --- 1. a chain of N trivial async nodes ------------------------------------------------


class ChainState(TypedDict, total=False):
    """One small value, overwritten by every node."""

    n: int


def chain(n: int, checkpointer: Any) -> Any:
    """START -> s0 -> s1 -> ... -> s{n-1} -> END; each node increments ``n``."""

    async def step(state: ChainState) -> dict[str, int]:
        return {"n": state.get("n", 0) + 1}

    builder: Any = StateGraph(ChainState)
    names = [f"s{i}" for i in range(n)]
    for name in names:
        builder.add_node(name, step)
    builder.add_edge(START, names[0])
    for a, b in itertools.pairwise(names):
        builder.add_edge(a, b)
    builder.add_edge(names[-1], END)
    return builder.compile(checkpointer=checkpointer)


# --- 2. fan-out to a selected subset, joined once ---------------------------------------


class FanState(TypedDict, total=False):
    """The selection, and one mark per finished branch."""

    selected: list[str]
    done: Annotated[list[str], operator.add]


def fanout(width: int, checkpointer: Any) -> Any:
    """plan selects half of ``width`` branches; each runs once; a deferred join ends it."""
    branches = [f"b{i}" for i in range(width)]

    async def plan(state: FanState) -> dict[str, Any]:
        return {"selected": branches[: max(1, width // 2)]}

    def route(state: FanState) -> list[str]:
        return list(state["selected"])

    def branch(name: str) -> Any:
        async def run(state: FanState) -> dict[str, Any]:
            return {"done": [name]}

        return run

    async def gather(state: FanState) -> dict[str, Any]:
        return {}

    builder: Any = StateGraph(FanState)
    builder.add_node("plan", plan)
    for b in branches:
        builder.add_node(b, branch(b))
        builder.add_edge(b, "gather")
    builder.add_node("gather", gather, defer=True)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", route, branches)
    builder.add_edge("gather", END)
    return builder.compile(checkpointer=checkpointer)


# --- 3. a loop whose state accumulates (operator.add) -----------------------------------


class GrowState(TypedDict, total=False):
    """A list every step appends one item to, and a step counter."""

    items: Annotated[list[str], operator.add]
    n: int


def growing(
    steps: int, item: str, checkpointer: Any, on_step: Callable[[int], None] | None = None
) -> Any:
    """One node looping ``steps`` times, appending ``item`` to ``items`` each time.

    ``on_step(n)`` is called as step n+1 starts (n steps committed).
    """

    async def step(state: GrowState) -> dict[str, Any]:
        if on_step is not None:
            on_step(state.get("n", 0))
        n = state.get("n", 0) + 1
        return {"items": [f"{n:06d}{item}"], "n": n}

    def again(state: GrowState) -> str:
        return "step" if state.get("n", 0) < steps else END

    builder: Any = StateGraph(GrowState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", again, ["step", END])
    return builder.compile(checkpointer=checkpointer)


# --- 4/5. one node that may sleep ---------------------------------------------------------


def single(checkpointer: Any, sleep_s: float = 0.0) -> Any:
    """START -> work -> END; ``work`` sleeps ``sleep_s`` (an executor's latency)."""

    async def work(state: ChainState) -> dict[str, int]:
        if sleep_s:
            await asyncio.sleep(sleep_s)
        return {"n": 1}

    builder: Any = StateGraph(ChainState)
    builder.add_node("work", work)
    builder.add_edge(START, "work")
    builder.add_edge("work", END)
    return builder.compile(checkpointer=checkpointer)
