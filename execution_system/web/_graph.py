"""A delivery's control graph with each node's state, and its server-rendered SVG diagram."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from typing import Any

from markupsafe import Markup, escape

from contracts import (
    ActionNode,
    BarrierNode,
    ControlGraph,
    DeliveryId,
    NodeId,
    NodeState,
    OperationNode,
    ParallelNode,
    WaitNode,
)
from host import CoordinatorHost, NodeView


def edges_of(graph: ControlGraph) -> list[dict[str, str]]:
    """Every declared edge, with what declares it (next, route, failure, branch)."""
    found: list[dict[str, str]] = []
    for name, node in graph.nodes.items():
        if isinstance(node, ActionNode | OperationNode | WaitNode):
            if node.next is not None:
                found.append({"from": name, "to": node.next, "kind": "next", "label": ""})
            if node.routes is not None:
                for case, target in node.routes.cases.items():
                    found.append({"from": name, "to": target, "kind": "route", "label": case})
        if isinstance(node, ActionNode | OperationNode) and node.on_failure is not None:
            found.append({"from": name, "to": node.on_failure, "kind": "failure", "label": ""})
        if isinstance(node, ParallelNode):
            for branch in node.branches:
                found.append({"from": name, "to": branch, "kind": "branch", "label": ""})
        if isinstance(node, BarrierNode):
            found.append({"from": name, "to": node.next, "kind": "next", "label": ""})
    return found


def current_path(lines: list[bytes]) -> list[str]:
    """Nodes in the order the current round reached them.

    A node seen again under a newer activation means a back edge began a new
    round: the path is cut back to where that node first stood.
    """
    path: list[str] = []
    seen: dict[str, int] = {}
    for line in lines[1:]:
        event = json.loads(line)
        node, activation = event.get("node"), event.get("activation")
        if not isinstance(node, str) or not isinstance(activation, int):
            continue
        if node not in seen:
            path.append(node)
        elif activation > seen[node]:
            path = path[: path.index(node)] if node in path else path
            path.append(node)
        seen[node] = max(activation, seen.get(node, 0))
    return path


def graph_view(
    host: CoordinatorHost,
    delivery: DeliveryId,
    *,
    states: Mapping[NodeId, NodeView] | None = None,
    lines: list[bytes] | None = None,
    graph: ControlGraph | None = None,
) -> dict[str, Any]:
    """Nodes with their states, edges, the path of the current round, parallel selections.

    ``states`` (inspect's ``nodes``), ``lines`` (the journal) and ``graph`` (the admitted
    graph) may be passed in by a caller that already has them.
    """
    if graph is None:
        graph = host.admitted(delivery).graph
    if states is None:
        states = host.inspect(delivery).nodes
    path = current_path(lines if lines is not None else host.journal_lines(delivery))
    on_path = set(path)
    nodes = []
    parallels = []
    for name, node in graph.nodes.items():
        found = states.get(NodeId(name))
        view = found.to_json() if found else {"state": "pending", "attempts": 0, "activations": 0}
        nodes.append({"id": name, "kind": node.kind, **view})
        if isinstance(node, ParallelNode):
            parallels.append(
                {
                    "node": name,
                    "branches": list(node.branches),
                    "selected": [b for b in node.branches if b in on_path],
                    "required": list(node.required),
                    "barrier": node.barrier,
                }
            )
    return {
        "delivery": delivery,
        "graph": graph.graph,
        "start": graph.start,
        "nodes": nodes,
        "edges": edges_of(graph),
        "path": path,
        "parallels": parallels,
    }


_W, _H, _GAP_X, _GAP_Y = 150, 40, 30, 46


def _layers(view: dict[str, Any]) -> dict[str, int]:
    """Breadth-first depth from the start node (back edges do not push nodes down)."""
    succ: dict[str, list[str]] = {n["id"]: [] for n in view["nodes"]}
    for edge in view["edges"]:
        succ.setdefault(edge["from"], []).append(edge["to"])
    depth = {view["start"]: 0}
    queue = deque([view["start"]])
    while queue:
        node = queue.popleft()
        for nxt in succ.get(node, []):
            if nxt not in depth:
                depth[nxt] = depth[node] + 1
                queue.append(nxt)
    bottom = max(depth.values(), default=0) + 1
    return {n["id"]: depth.get(n["id"], bottom) for n in view["nodes"]}


def _css(text: str) -> str:
    return "".join(c for c in text if c.isalnum() or c == "-")[:32]


def render_svg(view: dict[str, Any]) -> Markup:
    """The graph as an SVG document fragment: one box per node, coloured by its state."""
    depth = _layers(view)
    rows: dict[int, list[str]] = {}
    for node in view["nodes"]:
        rows.setdefault(depth[node["id"]], []).append(node["id"])
    width = max((len(r) for r in rows.values()), default=1) * (_W + _GAP_X) + _GAP_X
    height = (max(rows, default=0) + 1) * (_H + _GAP_Y) + _GAP_Y
    where: dict[str, tuple[int, int]] = {}
    for level, names in rows.items():
        offset = (width - len(names) * (_W + _GAP_X) + _GAP_X) // 2
        for i, name in enumerate(names):
            where[name] = (offset + i * (_W + _GAP_X), _GAP_Y // 2 + level * (_H + _GAP_Y))
    on_path = set(view["path"])
    path_edges = set(zip(view["path"], view["path"][1:], strict=False))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
        f"<title>{escape(view['graph'])}</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z"/>'
        "</marker></defs>",
    ]
    for edge in view["edges"]:
        if edge["from"] not in where or edge["to"] not in where:
            continue
        (x1, y1), (x2, y2) = where[edge["from"]], where[edge["to"]]
        sx, sy = x1 + _W // 2, y1 + _H
        tx, ty = x2 + _W // 2, y2
        if y2 <= y1:  # a back edge: route it around the side
            tx, ty = x2 + _W, y2 + _H // 2
        taken = " taken" if (edge["from"], edge["to"]) in path_edges else ""
        parts.append(
            f'<path class="edge {_css(edge["kind"])}{taken}" marker-end="url(#arrow)" '
            f'd="M {sx} {sy} C {sx} {sy + 20}, {tx} {ty - 20}, {tx} {ty}"/>'
        )
        if edge["label"]:
            parts.append(
                f'<text class="edge-label" x="{(sx + tx) // 2 + 4}" y="{(sy + ty) // 2}">'
                f"{escape(edge['label'])}</text>"
            )
    for node in view["nodes"]:
        x, y = where[node["id"]]
        state = _css(str(node["state"]))
        path_class = " on-path" if node["id"] in on_path else ""
        label = node["id"] if len(node["id"]) <= 20 else node["id"][:19] + "\u2026"
        parts.append(
            f'<g class="node state-{state} kind-{_css(node["kind"])}{path_class}">'
            f"<title>{escape(node['id'])}: {escape(node['state'])}, "
            f"{int(node['attempts'])} attempts</title>"
            f'<rect x="{x}" y="{y}" width="{_W}" height="{_H}" rx="6"/>'
            f'<text x="{x + _W // 2}" y="{y + 17}" text-anchor="middle">{escape(label)}</text>'
            f'<text class="sub" x="{x + _W // 2}" y="{y + 32}" text-anchor="middle">'
            f"{escape(node['kind'])} \u00b7 {escape(node['state'])}</text></g>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


STATES: tuple[str, ...] = tuple(s.value for s in NodeState)
"""Every node state the legend shows."""
