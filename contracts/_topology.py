"""Pure topology helpers over a control graph, shared by admission and the Host."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from contracts._spec import BarrierNode, ControlGraph, ParallelNode, TerminalNode


@dataclass(frozen=True, slots=True)
class Region:
    """The nodes of one branch of a parallel node (the barrier and terminals excluded)."""

    parallel: str
    """The parallel node that owns the branch."""
    branch: str
    """The branch head (also the branch's name)."""
    barrier: str
    """The barrier the branch ends at."""
    nodes: frozenset[str]
    """Every node reachable from the head before the barrier, head included."""


def predecessors(graph: ControlGraph) -> dict[str, list[str]]:
    """Node -> the nodes that declare it as a successor (declared nodes only)."""
    preds: dict[str, list[str]] = {node: [] for node in graph.nodes}
    for node in graph.nodes:
        for succ in graph.successors(node):
            if succ in preds:
                preds[succ].append(node)
    return preds


def branch_regions(graph: ControlGraph) -> list[Region]:
    """Every branch region of every parallel node, in declaration order.

    A region is what a branch can reach before its barrier; terminals end the
    delivery and belong to no region. Undeclared successors are skipped (they
    are admission errors reported elsewhere).
    """
    regions: list[Region] = []
    for pid, node in graph.nodes.items():
        if not isinstance(node, ParallelNode):
            continue
        for head in node.branches:
            regions.append(
                Region(
                    parallel=pid,
                    branch=head,
                    barrier=node.barrier,
                    nodes=frozenset(_reach(graph, head, stop=node.barrier)),
                )
            )
    return regions


def _reach(graph: ControlGraph, head: str, *, stop: str) -> list[str]:
    if head not in graph.nodes or head == stop:
        return []
    seen = {head}
    order = [head]
    queue = deque([head])
    while queue:
        current = queue.popleft()
        for succ in graph.successors(current):
            if succ == stop or succ in seen or succ not in graph.nodes:
                continue
            if isinstance(graph.nodes[succ], TerminalNode):
                continue
            seen.add(succ)
            order.append(succ)
            queue.append(succ)
    return order


def region_index(graph: ControlGraph) -> dict[str, Region]:
    """Node -> the region it belongs to (nodes outside every branch are absent)."""
    index: dict[str, Region] = {}
    for region in branch_regions(graph):
        for node in region.nodes:
            index.setdefault(node, region)
    return index


def barrier_owner(graph: ControlGraph) -> dict[str, list[str]]:
    """Barrier node -> the parallel nodes that name it (admission requires exactly one)."""
    owners: dict[str, list[str]] = {
        nid: [] for nid, node in graph.nodes.items() if isinstance(node, BarrierNode)
    }
    for pid, node in graph.nodes.items():
        if isinstance(node, ParallelNode):
            owners.setdefault(node.barrier, []).append(pid)
    return owners


def reachable(graph: ControlGraph) -> set[str]:
    """Every node reachable from ``start`` through declared successors."""
    if graph.start not in graph.nodes:
        return set()
    seen = {graph.start}
    queue = deque([graph.start])
    while queue:
        for succ in graph.successors(queue.popleft()):
            if succ in graph.nodes and succ not in seen:
                seen.add(succ)
                queue.append(succ)
    return seen


def strongly_connected(nodes: list[str], edges: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (deep graphs must not hit the recursion limit).

    Returns the components in the order they complete; only edges between
    members of ``nodes`` are followed.
    """
    members = set(nodes)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            succs = [s for s in edges.get(node, ()) if s in members]
            if child < len(succs):
                work.append((node, child + 1))
                succ = succs[child]
                if succ not in index:
                    work.append((succ, 0))
                elif succ in on_stack:
                    low[node] = min(low[node], index[succ])
                continue
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                components.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components
