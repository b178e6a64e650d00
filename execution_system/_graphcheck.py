"""Structural admission rules of a control graph (everything but dataflow).

Each rule raises the first violation it finds, with its own code and the
dotted path of the offending element. Rules run in a fixed order so the same
document always yields the same error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts import (
    RESERVED_NODE_IDS,
    ActionNode,
    BarrierNode,
    ControlGraph,
    ErrorCode,
    OperationNode,
    ParallelNode,
    Reference,
    Routes,
    TerminalNode,
    WaitNode,
    check_schema,
    enum_values,
    error,
    output_ports,
)
from contracts._topology import (
    barrier_owner,
    branch_regions,
    predecessors,
    reachable,
    strongly_connected,
)


def check_structure(graph: ControlGraph, operations: frozenset[str] | None = None) -> None:
    """Run every structural rule; raise the first violation."""
    _check_ids(graph)
    _check_successors(graph)
    _check_schemas(graph)
    for nid, node in graph.nodes.items():
        _check_node(graph, nid, node, operations)
    if not any(isinstance(n, TerminalNode) for n in graph.nodes.values()):
        raise error(
            ErrorCode.GRAPH_NO_TERMINAL,
            "the graph declares no terminal node",
            path="nodes",
            expected="at least one node of kind 'terminal'",
        )
    _check_regions(graph)
    _check_reachability(graph)
    _check_cycles(graph)


def _check_ids(graph: ControlGraph) -> None:
    for nid in graph.nodes:
        if nid in RESERVED_NODE_IDS:
            raise error(
                ErrorCode.GRAPH_RESERVED_NODE_ID,
                f"node id '{nid}' is reserved",
                path=f"nodes.{nid}",
                expected="a node id other than " + ", ".join(sorted(RESERVED_NODE_IDS)),
            )
    if graph.start not in graph.nodes:
        raise error(
            ErrorCode.GRAPH_UNDECLARED_START,
            f"start node '{graph.start}' is not declared",
            path="start",
            expected="the id of a declared node",
        )


def _undeclared(graph: ControlGraph, target: str, path: str, what: str) -> None:
    if target not in graph.nodes:
        code = (
            ErrorCode.GRAPH_UNDECLARED_BRANCH
            if what == "branch"
            else ErrorCode.GRAPH_UNDECLARED_SUCCESSOR
        )
        raise error(
            code,
            f"{what} '{target}' is not a declared node",
            path=path,
            expected="the id of a declared node",
        )


def _check_successors(graph: ControlGraph) -> None:
    for nid, node in graph.nodes.items():
        base = f"nodes.{nid}"
        if isinstance(node, ActionNode | OperationNode | WaitNode | BarrierNode):
            if node.next is not None:
                _undeclared(graph, node.next, f"{base}.next", "successor")
        if isinstance(node, ActionNode | OperationNode | WaitNode) and node.routes is not None:
            for case, target in node.routes.cases.items():
                _undeclared(graph, target, f"{base}.routes.cases.{case}", "successor")
        if isinstance(node, ActionNode | OperationNode) and node.on_failure is not None:
            _undeclared(graph, node.on_failure, f"{base}.on_failure", "failure successor")
        if isinstance(node, ParallelNode):
            seen: set[str] = set()
            for i, branch in enumerate(node.branches):
                _undeclared(graph, branch, f"{base}.branches.{i}", "branch")
                if branch in seen:
                    raise error(
                        ErrorCode.GRAPH_DUPLICATE_BRANCH,
                        f"branch '{branch}' is listed twice",
                        path=f"{base}.branches.{i}",
                        expected="distinct branch names",
                    )
                seen.add(branch)
            _undeclared(graph, node.barrier, f"{base}.barrier", "barrier")


def _check_schemas(graph: ControlGraph) -> None:
    check_schema(graph.input, "input")
    for nid, node in graph.nodes.items():
        if isinstance(node, ActionNode | OperationNode):
            for port, schema in node.outputs.items():
                check_schema(schema, f"nodes.{nid}.outputs.{port}")
        if isinstance(node, WaitNode):
            check_schema(node.result, f"nodes.{nid}.result")


def _check_node(
    graph: ControlGraph, nid: str, node: Any, operations: frozenset[str] | None
) -> None:
    base = f"nodes.{nid}"
    if isinstance(node, ActionNode | OperationNode | WaitNode):
        if node.next is not None and node.routes is not None:
            raise error(
                ErrorCode.GRAPH_AMBIGUOUS_SUCCESSOR,
                "both 'next' and 'routes' are declared",
                path=base,
                expected="exactly one of 'next' or 'routes'",
            )
        if node.next is None and node.routes is None:
            raise error(
                ErrorCode.GRAPH_MISSING_SUCCESSOR,
                "no successor is declared",
                path=base,
                expected="'next' or 'routes'",
            )
        if node.routes is not None:
            _check_routes(node, node.routes, f"{base}.routes")
    if isinstance(node, ActionNode) and node.paths is not None and node.workspace != "write":
        raise error(
            ErrorCode.GRAPH_WORKSPACE_PATHS_INVALID,
            "'paths' is only meaningful with 'workspace: write'",
            path=f"{base}.paths",
            expected="'workspace: write' or no 'paths'",
        )
    if isinstance(node, OperationNode) and operations is not None:
        if node.operation not in operations:
            raise error(
                ErrorCode.GRAPH_UNKNOWN_OPERATION,
                f"operation '{node.operation}' is not registered",
                path=f"{base}.operation",
                expected="one of " + ", ".join(sorted(operations)) if operations else "",
            )
    if isinstance(node, ParallelNode):
        for i, req in enumerate(node.required):
            if req not in node.branches:
                raise error(
                    ErrorCode.GRAPH_REQUIRED_NOT_BRANCH,
                    f"required branch '{req}' is not one of the branches",
                    path=f"{base}.required.{i}",
                    expected="a name listed in 'branches'",
                )
        if node.select is not None:
            _check_select(graph, node, f"{base}.select")


def _check_routes(node: Any, routes: Routes, path: str) -> None:
    ports = output_ports(node)
    if routes.port not in ports:
        raise error(
            ErrorCode.GRAPH_ROUTE_PORT_UNDECLARED,
            f"route port '{routes.port}' is not an output of this node",
            path=f"{path}.port",
            expected="a declared output port" if ports else "a declared output port (none)",
        )
    if isinstance(node, WaitNode):
        required = node.result.get("required", []) if isinstance(node.result, Mapping) else []
        if routes.port not in required:
            raise error(
                ErrorCode.GRAPH_ROUTE_PORT_NOT_ENUM,
                f"route port '{routes.port}' is not required by the wait's result schema",
                path=f"{path}.port",
                expected="a property listed in the result's 'required'",
            )
    values = enum_values(ports[routes.port])
    if values is None or not all(isinstance(v, str) for v in values):
        raise error(
            ErrorCode.GRAPH_ROUTE_PORT_NOT_ENUM,
            f"route port '{routes.port}' is not a string enum",
            path=f"{path}.port",
            expected="an output whose schema is {enum: [strings]}",
        )
    for case in routes.cases:
        if case not in values:
            raise error(
                ErrorCode.GRAPH_ROUTE_UNKNOWN_CASE,
                f"route case '{case}' is not a value of port '{routes.port}'",
                path=f"{path}.cases.{case}",
                expected="one of " + ", ".join(str(v) for v in values),
            )
    missing = [v for v in values if v not in routes.cases]
    if missing:
        raise error(
            ErrorCode.GRAPH_ROUTE_NOT_COVERED,
            f"route cases do not cover {', '.join(repr(v) for v in missing)}",
            path=f"{path}.cases",
            expected="a case for every enum value of the port",
        )


def _check_select(graph: ControlGraph, node: ParallelNode, path: str) -> None:
    ref = Reference.parse(node.select or "")
    source = graph.nodes.get(ref.source)
    ports = output_ports(source) if source is not None else {}
    if source is None or ref.port not in ports:
        raise error(
            ErrorCode.GRAPH_SELECT_INVALID,
            f"select '{node.select}' does not name a declared output port",
            path=path,
            expected="<node>.<port> of a declared output",
        )
    schema = ports[ref.port]
    items = schema.get("items") if isinstance(schema, Mapping) else None
    values = enum_values(items)
    if not isinstance(schema, Mapping) or schema.get("type") != "array" or values is None:
        raise error(
            ErrorCode.GRAPH_SELECT_INVALID,
            f"select port '{node.select}' is not an array of branch names",
            path=path,
            expected="{type: array, items: {enum: [branch names]}}",
        )
    missing = [r for r in node.required if r not in values]
    if missing:
        raise error(
            ErrorCode.GRAPH_SELECT_INVALID,
            f"select port '{node.select}' can never name required branch "
            f"{', '.join(repr(r) for r in missing)}",
            path=path,
            expected="items.enum to include every required branch",
        )
    unknown = [v for v in values if v not in node.branches]
    if unknown:
        raise error(
            ErrorCode.GRAPH_SELECT_INVALID,
            f"select port '{node.select}' admits {', '.join(repr(v) for v in unknown)}, "
            "which are not branches",
            path=path,
            expected="items.enum drawn from " + ", ".join(node.branches),
        )


def _check_regions(graph: ControlGraph) -> None:
    owners = barrier_owner(graph)
    for pid, node in graph.nodes.items():
        if isinstance(node, ParallelNode) and not isinstance(
            graph.nodes[node.barrier], BarrierNode
        ):
            raise error(
                ErrorCode.GRAPH_BARRIER_MISMATCH,
                f"'{node.barrier}' is not a barrier node",
                path=f"nodes.{pid}.barrier",
                expected="a node of kind 'barrier'",
            )
    for bid, parallels in owners.items():
        if len(parallels) != 1:
            raise error(
                ErrorCode.GRAPH_BARRIER_MISMATCH,
                f"barrier '{bid}' is named by {len(parallels)} parallel nodes",
                path=f"nodes.{bid}",
                expected="exactly one parallel node naming it",
            )
    preds = predecessors(graph)
    claimed: dict[str, str] = {}
    for region in branch_regions(graph):
        base = f"nodes.{region.parallel}.branches"
        arrives = False
        # A nested parallel drags its own barrier into the region; report the
        # parallel, whatever the two ids' sort order.
        for member in sorted(region.nodes):
            if isinstance(graph.nodes[member], ParallelNode):
                raise error(
                    ErrorCode.GRAPH_NESTED_PARALLEL,
                    f"branch '{region.branch}' contains parallel node '{member}'",
                    path=f"nodes.{member}",
                    expected="parallel regions that do not nest",
                )
        for member in sorted(region.nodes):
            member_node = graph.nodes[member]
            if isinstance(member_node, WaitNode | BarrierNode):
                raise error(
                    ErrorCode.GRAPH_BRANCH_ESCAPES,
                    f"branch '{region.branch}' contains {member_node.kind} node '{member}'",
                    path=f"nodes.{member}",
                    expected="only action and operation nodes inside a branch",
                )
            if member in claimed:
                raise error(
                    ErrorCode.GRAPH_BRANCH_ESCAPES,
                    f"node '{member}' is reachable from branches "
                    f"'{claimed[member]}' and '{region.branch}'",
                    path=f"nodes.{member}",
                    expected="branches that do not share nodes",
                )
            claimed[member] = region.branch
            for pred in preds[member]:
                if pred not in region.nodes and not (
                    member == region.branch and pred == region.parallel
                ):
                    raise error(
                        ErrorCode.GRAPH_BRANCH_ESCAPES,
                        f"node '{member}' of branch '{region.branch}' is entered from "
                        f"'{pred}', outside the branch",
                        path=f"nodes.{pred}",
                        expected=f"only '{region.parallel}' entering the branch",
                    )
            for succ in graph.successors(member):
                if succ == region.barrier:
                    arrives = True
                elif succ not in region.nodes and not isinstance(graph.nodes[succ], TerminalNode):
                    raise error(
                        ErrorCode.GRAPH_BRANCH_ESCAPES,
                        f"node '{member}' of branch '{region.branch}' leads to '{succ}', "
                        f"outside the branch",
                        path=f"nodes.{member}",
                        expected=f"a branch node, a terminal, or barrier '{region.barrier}'",
                    )
        if not arrives:
            raise error(
                ErrorCode.GRAPH_BARRIER_MISMATCH,
                f"branch '{region.branch}' never reaches barrier '{region.barrier}'",
                path=base,
                expected=f"every branch to lead to '{region.barrier}'",
            )
    for bid, parallels in owners.items():
        for pred in preds[bid]:
            owner = claimed.get(pred)
            parallel = graph.nodes[parallels[0]]
            assert isinstance(parallel, ParallelNode)
            if owner is None or owner not in parallel.branches:
                raise error(
                    ErrorCode.GRAPH_BARRIER_MISMATCH,
                    f"barrier '{bid}' is entered from '{pred}', which is not in a branch of "
                    f"'{parallels[0]}'",
                    path=f"nodes.{pred}",
                    expected=f"only branches of '{parallels[0]}' leading to '{bid}'",
                )


def _check_reachability(graph: ControlGraph) -> None:
    seen = reachable(graph)
    for nid in graph.nodes:
        if nid not in seen:
            raise error(
                ErrorCode.GRAPH_UNREACHABLE_NODE,
                f"node '{nid}' cannot be reached from start '{graph.start}'",
                path=f"nodes.{nid}",
                expected="every node reachable from start",
            )


def _check_cycles(graph: ControlGraph) -> None:
    unbounded = [nid for nid, node in graph.nodes.items() if node.max_visits is None]
    edges = {nid: graph.successors(nid) for nid in unbounded}
    for component in strongly_connected(unbounded, edges):
        if len(component) > 1 or component[0] in edges.get(component[0], []):
            first = min(component, key=list(graph.nodes).index)
            raise error(
                ErrorCode.GRAPH_UNBOUNDED_CYCLE,
                f"a cycle through '{first}' passes no node with max_visits",
                path=f"nodes.{first}",
                expected="max_visits on at least one node of every cycle",
            )
