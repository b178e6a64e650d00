"""Rendering a control graph for people (Mermaid) and programs (JSON)."""

from __future__ import annotations

from typing import Any

from contracts import (
    ActionNode,
    BarrierNode,
    ControlGraph,
    OperationNode,
    ParallelNode,
    TerminalNode,
    WaitNode,
    graph_digest,
)


def edges(graph: ControlGraph) -> list[dict[str, str]]:
    """Every declared edge with its label (route case, failure, branch)."""
    found: list[dict[str, str]] = []
    for nid, node in graph.nodes.items():
        if isinstance(node, ActionNode | OperationNode | WaitNode):
            if node.next is not None:
                found.append({"from": nid, "to": node.next, "label": ""})
            if node.routes is not None:
                for case, target in node.routes.cases.items():
                    found.append({"from": nid, "to": target, "label": case})
        if isinstance(node, ActionNode | OperationNode) and node.on_failure is not None:
            found.append({"from": nid, "to": node.on_failure, "label": "on failure"})
        if isinstance(node, ParallelNode):
            for branch in node.branches:
                label = "required" if branch in node.required else "branch"
                found.append({"from": nid, "to": branch, "label": label})
        if isinstance(node, BarrierNode):
            found.append({"from": nid, "to": node.next, "label": ""})
    return found


def to_json(graph: ControlGraph) -> dict[str, Any]:
    """The normalized graph, its digest and its edge list."""
    return {
        "graph": graph.graph,
        "digest": graph_digest(graph),
        "start": graph.start,
        "nodes": {
            nid: node.model_dump(mode="json", exclude_none=True)
            for nid, node in graph.nodes.items()
        },
        "edges": edges(graph),
    }


def _shape(nid: str, node: Any) -> str:
    label = f"{nid}<br/><small>{node.kind}</small>"
    if isinstance(node, ActionNode):
        label = f"{nid}<br/><small>action: {node.executor}</small>"
    if isinstance(node, OperationNode):
        label = f"{nid}<br/><small>operation: {node.operation}</small>"
    if isinstance(node, WaitNode):
        return f'{nid}{{{{"{nid}<br/><small>wait: {node.wait}</small>"}}}}'
    if isinstance(node, TerminalNode):
        return f'{nid}(["{nid}<br/><small>{node.outcome}</small>"])'
    if isinstance(node, ParallelNode | BarrierNode):
        return f'{nid}[/"{label}"/]'
    return f'{nid}["{label}"]'


def to_mermaid(graph: ControlGraph) -> str:
    """A Mermaid flowchart of the graph."""
    lines = ["flowchart TD", f"  %% graph {graph.graph} {graph_digest(graph)}"]
    lines.append(f"  __start__((start)) --> {graph.start}")
    for nid, node in graph.nodes.items():
        lines.append(f"  {_shape(nid, node)}")
    for edge in edges(graph):
        style = "-.->" if edge["label"] == "on failure" else "-->"
        label = f"|{edge['label']}|" if edge["label"] else ""
        lines.append(f"  {edge['from']} {style}{label} {edge['to']}")
    return "\n".join(lines)
