"""Compiling a control graph into a LangGraph graph, once per graph digest.

The LangGraph graph has one node per control-graph node and no static edges
between them: each handler returns ``Command(goto=...)`` naming exactly the
successors the Host chose (route, selected branches, failure successor), so
LangGraph never picks a path itself. ``START`` routes to whatever the resume
input wakes (the start node on a new delivery, an answered action, a resolved
wait). Delivery-specific context travels in the run config, so one compiled
graph serves every delivery of the same graph.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph._internal._runnable import RunnableCallable
from langgraph.graph import START, StateGraph
from langgraph.types import Command

from contracts import ControlGraph, graph_digest
from contracts._gc import collector_paused
from host._context import CompiledGraphInfo, DeliveryContext
from host._handlers import handle
from host.langgraph._state import ThreadState

CONTEXT_KEY = "__execsys_context"
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


# Built once and shared by every node: a node given a runnable is taken as it is, where
# a plain callable costs LangGraph a signature and type-hint inspection per node (about
# two thirds of compiling a large graph).
_NODE = RunnableCallable(None, _Step(), name="execsys_node", trace=False)


def _route_start(state: dict[str, Any]) -> list[str]:
    return sorted((state.get("wake") or {}).keys())


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
            for node_id in graph.nodes:
                builder.add_node(node_id, _NODE, input_schema=ThreadState)
            builder.add_conditional_edges(START, _route_start, list(graph.nodes))
            return builder.compile(checkpointer=self.checkpointer)
