"""What a journal header declares about a control graph, derived from the graph alone.

The Host writes these declarations into every header it creates, and the audit
derives them again from the admitted graph in a bundle: the two must agree, so
a header cannot claim looser rules (fewer roles, missing edges) than its graph.
"""

from __future__ import annotations

from contracts._journal import ApprovalRequirement, NodeDecl, TaskKind
from contracts._spec import ActionNode, ControlGraph, OperationNode, WaitNode
from contracts._topology import predecessors


def node_decls(graph: ControlGraph) -> tuple[NodeDecl, ...]:
    """Every node's :class:`NodeDecl`, in the graph's declaration order.

    ``upstream`` holds every node with a declared edge into the node (next,
    routes, branches, barrier, on_failure); ``failure_upstream`` those whose
    ``on_failure`` names it. A wait is a hybrid step whose completion must carry
    the approvals its ``authority`` asks for.
    """
    preds = predecessors(graph)
    failing: dict[str, list[str]] = {nid: [] for nid in graph.nodes}
    for nid, node in graph.nodes.items():
        if isinstance(node, ActionNode | OperationNode) and node.on_failure is not None:
            failing.setdefault(node.on_failure, []).append(nid)
    decls = []
    for nid, node in graph.nodes.items():
        upstream = tuple(sorted(preds[nid]))
        failure_upstream = tuple(sorted(failing.get(nid, ())))
        if isinstance(node, WaitNode):
            authority = node.authority
            decls.append(
                NodeDecl(
                    id=nid,
                    task=TaskKind.HYBRID,
                    upstream=upstream,
                    failure_upstream=failure_upstream,
                    roles=authority.roles,
                    approval=ApprovalRequirement(
                        roles=authority.roles,
                        min_count=authority.min_count,
                        distinct_actors=authority.distinct_actors,
                    ),
                )
            )
        else:
            decls.append(NodeDecl(id=nid, upstream=upstream, failure_upstream=failure_upstream))
    return tuple(decls)
