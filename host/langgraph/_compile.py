"""Compiling a control graph into a LangGraph graph, once per graph digest.

Two layouts (decision 0158), neither with static edges: each step returns
``Command(goto=...)`` naming exactly the successors the Host chose (route,
selected branches, failure successor), so LangGraph never picks a path itself.

* A graph with a parallel node gets one LangGraph node per control-graph node:
  selected branches run side by side in one super-step, and a barrier that
  several branches reach in the same super-step runs once.
* A graph without one never has more than one node scheduled at a time. It gets
  a single LangGraph node, :data:`SOLE_NODE`, that runs whichever control node
  the previous step scheduled (the ``scheduled`` channel) or the resume input
  wakes. LangGraph's own per-step work walks every node and trigger channel that
  has run (copying ``versions_seen``, checkpointing each channel, comparing
  versions); with one node it stays the same size however long the delivery.

``START`` routes to whatever the resume input wakes (the start node on a new
delivery, an answered action, a resolved wait). Delivery-specific context
travels in the run config, so one compiled graph serves every delivery of the
same graph.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph._internal._runnable import RunnableCallable
from langgraph.graph import START, StateGraph
from langgraph.types import Command

from contracts import ControlGraph, ErrorCode, ParallelNode, error, graph_digest
from contracts._gc import collector_paused
from host._context import CompiledGraphInfo, DeliveryContext
from host._handlers import handle
from host.langgraph._state import ThreadState

CONTEXT_KEY = "__execsys_context"
SOLE_NODE = "execsys"
"""The one LangGraph node of a graph without parallel nodes."""
_DIGEST_MEMO = 64


class _Step:
    """Every node's LangGraph callable: the core's step, its result turned into a ``Command``.

    LangGraph names the node it runs in the task's metadata, so one callable
    serves every node of every graph. An object rather than a function: LangGraph
    disassembles a node function's bytecode, once per node, looking for subgraphs.
    """

    async def __call__(self, state: dict[str, Any], config: RunnableConfig) -> Any:
        ctx: DeliveryContext = config["configurable"][CONTEXT_KEY]
        metadata = config.get("metadata") or {}
        step = int(metadata.get("langgraph_step", 0))
        result = await handle(metadata["langgraph_node"], state, ctx, step)
        # The one translation of a core step into LangGraph's terms.
        return Command(update=result.update, goto=list(result.goto))


class _SoleStep:
    """The one node of a sequential graph: runs the control node scheduled or woken."""

    async def __call__(self, state: dict[str, Any], config: RunnableConfig) -> Any:
        ctx: DeliveryContext = config["configurable"][CONTEXT_KEY]
        metadata = config.get("metadata") or {}
        step = int(metadata.get("langgraph_step", 0))
        node_id = sole_scheduled(state)
        if node_id is None:
            return Command(update={}, goto=[])
        result = await handle(node_id, state, ctx, step)
        if len(result.goto) > 1:
            raise error(
                ErrorCode.INTERNAL,
                f"'{node_id}' scheduled {len(result.goto)} nodes in a graph without parallel nodes",
                path=ctx.delivery.delivery_id,
            )
        before = state.get("scheduled") or {}
        after = {n: 1 for n in result.goto}
        update = result.update
        if after != before:  # a node that schedules itself again writes nothing here
            scheduled = {n: None for n in before if n not in after} | after
            update = {**update, "scheduled": scheduled}
        return Command(update=update, goto=[SOLE_NODE] if result.goto else [])


def sole_scheduled(state: dict[str, Any]) -> str | None:
    """The control node a sequential graph's one LangGraph node runs now, if any.

    The resume input's wake comes first (an answer, a resolution, a directive);
    otherwise the successor the previous step scheduled.
    """
    for channel in ("wake", "scheduled"):
        names = sorted(state.get(channel) or {})
        if len(names) > 1:
            raise error(
                ErrorCode.INTERNAL,
                f"{len(names)} nodes in '{channel}' of a graph without parallel nodes",
                path=",".join(names),
            )
        if names:
            return str(names[0])
    return None


# Built once and shared by every node: a node given a runnable is taken as it is, where
# a plain callable costs LangGraph a signature and type-hint inspection per node (about
# two thirds of compiling a large graph).
_NODE = RunnableCallable(None, _Step(), name="execsys_node", trace=False)
_SOLE = RunnableCallable(None, _SoleStep(), name="execsys_node", trace=False)


def _route_start(state: dict[str, Any]) -> list[str]:
    return sorted((state.get("wake") or {}).keys())


def _route_start_sole(state: dict[str, Any]) -> list[str]:
    return [SOLE_NODE] if state.get("wake") else []


def is_sequential(graph: ControlGraph) -> bool:
    """Whether ``graph`` gets the one-node layout (it has no parallel node)."""
    return not any(isinstance(node, ParallelNode) for node in graph.nodes.values())


class GraphCache:
    """Compiled graphs keyed by graph digest (thread-safe)."""

    def __init__(self, checkpointer: Any) -> None:
        self.checkpointer = checkpointer
        self._graphs: dict[str, tuple[Any, CompiledGraphInfo]] = {}
        # Digesting a graph canonicalizes all of it (~0.5 ms at 35 nodes), and a run
        # looks its graph up more than once: remember the digest of the last few graph
        # objects. The entry holds the (frozen) graph itself, so its id is not reused.
        self._digests: OrderedDict[int, tuple[ControlGraph, str]] = OrderedDict()
        self._lock = threading.Lock()
        self.compiles = 0
        """How many graphs were compiled (a benchmark checks it stays at one per graph)."""
        self.one_node = True
        """Whether graphs without parallel nodes get the one-node layout (tests turn it off
        to write threads as a release before decision 0158 did)."""

    def get(self, graph: ControlGraph) -> tuple[Any, CompiledGraphInfo]:
        """The compiled graph and its facts for ``graph``, compiling on first use."""
        with self._lock:
            known = self._digests.get(id(graph))
            if known is not None and known[0] is graph:
                key = known[1]
                self._digests.move_to_end(id(graph))
            else:
                key = graph_digest(graph)
                self._digests[id(graph)] = (graph, key)
                while len(self._digests) > _DIGEST_MEMO:
                    self._digests.popitem(last=False)
            found = self._graphs.get(key)
            if found is None:
                found = (self._compile(graph), CompiledGraphInfo.of(graph))
                self._graphs[key] = found
                self.compiles += 1
            return found

    def _compile(self, graph: ControlGraph) -> Any:
        with collector_paused():
            builder: Any = StateGraph(ThreadState)
            if self.one_node and is_sequential(graph):
                builder.add_node(SOLE_NODE, _SOLE, input_schema=ThreadState)
                builder.add_conditional_edges(START, _route_start_sole, [SOLE_NODE])
                return builder.compile(checkpointer=self.checkpointer)
            for node_id in graph.nodes:
                builder.add_node(node_id, _NODE, input_schema=ThreadState)
            builder.add_conditional_edges(START, _route_start, list(graph.nodes))
            return builder.compile(checkpointer=self.checkpointer)
