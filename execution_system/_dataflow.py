"""Dataflow admission: every required read is produced on every path to its reader.

A forward "must" analysis over the control graph: ``guaranteed(v)`` is the set
of nodes that have completed on every path from ``start`` to ``v``. Sets are
Python ints used as bitsets, so a 2,000-node graph costs a few passes of
integer ``&``/``|``.

Two edges are special:

* ``on_failure``: the failed node produced nothing, so its successor inherits
  what held *before* it.
* a barrier: a branch that runs in every round (all branches without
  ``select``; the ``required`` ones with it, since a selection must include
  them) guarantees after the barrier whatever it guarantees on its way there.
  Any other branch may be unselected, so its outputs are readable only as
  ``?``.
"""

from __future__ import annotations

from collections.abc import Mapping

from contracts import (
    ActionNode,
    BarrierNode,
    ControlGraph,
    ErrorCode,
    OperationNode,
    ParallelNode,
    Reference,
    WaitNode,
    error,
    output_ports,
)
from contracts._topology import branch_regions


def check_dataflow(graph: ControlGraph) -> None:
    """Raise the first read that is undeclared or not guaranteed."""
    guaranteed = _guaranteed(graph)
    props, required = _input_fields(graph)
    position = {nid: i for i, nid in enumerate(graph.nodes)}
    for nid, node in graph.nodes.items():
        reads: list[tuple[str, str]] = []
        if isinstance(node, ActionNode | OperationNode):
            reads = [(f"nodes.{nid}.inputs.{name}", ref) for name, ref in node.inputs.items()]
        elif isinstance(node, ParallelNode) and node.select is not None:
            reads = [(f"nodes.{nid}.select", node.select)]
        for path, text in reads:
            ref = Reference.parse(text)
            if ref.source == "input":
                if ref.port not in props:
                    raise error(
                        ErrorCode.DATAFLOW_UNKNOWN_INPUT,
                        f"'{text}' reads an input field the input schema does not declare",
                        path=path,
                        expected="a property of the input schema",
                    )
                if not ref.optional and ref.port not in required:
                    raise error(
                        ErrorCode.DATAFLOW_NOT_GUARANTEED,
                        f"'{text}' reads an input field that is not required",
                        path=path,
                        expected=f"'{ref.port}' in the input schema's 'required', or '{text}?'",
                    )
                continue
            source = graph.nodes.get(ref.source)
            if source is None:
                raise error(
                    ErrorCode.DATAFLOW_UNKNOWN_NODE,
                    f"'{text}' reads from undeclared node '{ref.source}'",
                    path=path,
                    expected="<node>.<port> of a declared node, or input.<field>",
                )
            ports = output_ports(source)
            if ref.port not in ports:
                raise error(
                    ErrorCode.DATAFLOW_UNKNOWN_PORT,
                    f"'{text}' reads port '{ref.port}', which '{ref.source}' does not declare",
                    path=path,
                    expected="one of " + ", ".join(sorted(ports)) if ports else "no reads",
                )
            if ref.optional:
                continue
            if isinstance(source, WaitNode):
                req = source.result.get("required", []) if isinstance(source.result, dict) else []
                if ref.port not in req:
                    raise error(
                        ErrorCode.DATAFLOW_NOT_GUARANTEED,
                        f"'{text}' reads a wait result property that is not required",
                        path=path,
                        expected=f"'{ref.port}' in the result's 'required', or '{text}?'",
                    )
            if not guaranteed[nid] >> position[ref.source] & 1:
                raise error(
                    ErrorCode.DATAFLOW_NOT_GUARANTEED,
                    f"'{text}' is not produced on every path to '{nid}'",
                    path=path,
                    expected=f"'{ref.source}' to complete on every path to '{nid}', or '{text}?'",
                )


def _input_fields(graph: ControlGraph) -> tuple[set[str], set[str]]:
    schema = graph.input
    if not isinstance(schema, Mapping):
        return set(), set()
    props = schema.get("properties")
    req = schema.get("required")
    return (
        set(props) if isinstance(props, Mapping) else set(),
        {r for r in req if isinstance(r, str)} if isinstance(req, list) else set(),
    )


def _guaranteed(graph: ControlGraph) -> dict[str, int]:
    """Node -> bitset of nodes completed on every path reaching it."""
    order = list(graph.nodes)
    bit = {nid: 1 << i for i, nid in enumerate(order)}
    everything = (1 << len(order)) - 1
    regions = branch_regions(graph)
    region_of: dict[str, tuple[str, str]] = {}
    for region in regions:
        for member in region.nodes:
            region_of[member] = (region.parallel, region.branch)

    barrier_parallel = {
        node.barrier: pid for pid, node in graph.nodes.items() if isinstance(node, ParallelNode)
    }
    # Branch -> its (tail, via_failure) arrivals, per barrier: a tail that
    # reaches the barrier through on_failure arrives without its outputs.
    arrivals: dict[str, dict[str, list[tuple[str, bool]]]] = {b: {} for b in barrier_parallel}
    # Incoming contributions: (pred, via_failure) pairs; barriers are computed apart.
    incoming: dict[str, list[tuple[str, bool]]] = {nid: [] for nid in order}
    for nid, node in graph.nodes.items():
        normal: list[str] = []
        if isinstance(node, ActionNode | OperationNode | WaitNode):
            if node.next is not None:
                normal.append(node.next)
            if node.routes is not None:
                normal.extend(node.routes.cases.values())
        if isinstance(node, BarrierNode):
            normal.append(node.next)
        if isinstance(node, ParallelNode):
            normal.extend(node.branches)
        edges = [(succ, False) for succ in normal]
        if isinstance(node, ActionNode | OperationNode) and node.on_failure is not None:
            edges.append((node.on_failure, True))
        for succ, via_failure in edges:
            if succ in barrier_parallel:
                if nid in region_of:
                    branch = region_of[nid][1]
                    arrivals[succ].setdefault(branch, []).append((nid, via_failure))
            elif succ in incoming:
                incoming[succ].append((nid, via_failure))

    in_set = {nid: everything for nid in order}
    in_set[graph.start] = 0
    sweep = _reverse_postorder(graph)
    changed = True
    while changed:
        changed = False
        for nid in sweep:
            if nid == graph.start:
                # A loop may re-enter start, but its first visit has no history.
                new = 0
            elif nid in barrier_parallel:
                pid = barrier_parallel[nid]
                parallel = graph.nodes[pid]
                assert isinstance(parallel, ParallelNode)
                new = in_set[pid] | bit[pid]
                always = set(parallel.branches if parallel.select is None else parallel.required)
                for branch, tails in arrivals[nid].items():
                    if branch not in always:
                        continue
                    branch_must = everything
                    for tail, via_failure in tails:
                        branch_must &= in_set[tail] if via_failure else in_set[tail] | bit[tail]
                    new |= branch_must
            else:
                preds = incoming[nid]
                new = everything if preds else 0
                for pred, via_failure in preds:
                    new &= in_set[pred] if via_failure else in_set[pred] | bit[pred]
            if new != in_set[nid]:
                in_set[nid] = new
                changed = True
    return in_set


def _reverse_postorder(graph: ControlGraph) -> list[str]:
    """Nodes in reverse postorder from ``start`` (then any others, in declaration order).

    Sweeping a forward analysis in this order visits a node after its
    predecessors except across back edges, so the fixpoint takes a few passes
    whatever the declaration order (sweeping in declaration order may take one
    pass per node of a graph declared backwards).
    """
    post: list[str] = []
    seen = {graph.start}
    work = [(graph.start, iter(graph.successors(graph.start)))]
    while work:
        node, children = work[-1]
        child = next(children, None)
        if child is None:
            work.pop()
            post.append(node)
        elif child in graph.nodes and child not in seen:
            seen.add(child)
            work.append((child, iter(graph.successors(child))))
    post.reverse()
    return post + [nid for nid in graph.nodes if nid not in seen]
