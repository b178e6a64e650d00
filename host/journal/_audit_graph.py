"""The audit's graph rules: what the admitted graph allows, checked event by event.

The append rules (``_rules``) know only the header's node declarations; these
rules read the admitted graph itself (routes, parallel selections, barriers,
``max_visits``, terminals, failure successors, port schemas) and, when the
bundle carries them, the records the events reference. Each check raises one
:class:`~contracts.ExecsysError` with an ``AUDIT_*`` code and the event ordinal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contracts._errors import ErrorCode, error
from contracts._ids import NodeId
from contracts._schema import validation_problem, validator_for
from contracts._spec import (
    ActionNode,
    ControlGraph,
    OperationNode,
    ParallelNode,
    TerminalNode,
    WaitNode,
    output_ports,
)
from contracts._topology import region_index
from host.journal._codec import at
from host.journal._state import STATE_OF, Key, ReplayState

Fields = dict[str, Any]
RecordLoader = Callable[[str, int], Any]
"""``load(digest, ordinal)``: the record's value, or raise AUDIT_RECORD_MISSING."""

#: What a completion of each node kind must reference, as ``(kind, id suffix)``.
_OUTPUT, _SELECTION, _CONDUCT = "output", "selection", "conduct"
#: After a terminal completed, only these may still be recorded (stopping siblings, restarts).
_AFTER_TERMINAL = frozenset({"work-failed", "work-invalidated", "successor-bound"})
_SIBLING_STOPPED = ErrorCode.SIBLING_STOPPED.value


class GraphRules:
    """Checks one journal's events against the admitted graph, in ordinal order."""

    def __init__(self, graph: ControlGraph, load: RecordLoader | None) -> None:
        self.graph = graph
        self.load = load
        """Record loader; None when the bundle carries digests only."""
        self.regions = region_index(graph)
        self.barriers = {
            node.barrier: pid for pid, node in graph.nodes.items() if isinstance(node, ParallelNode)
        }
        # Edges by kind: a failure-only edge may be taken only from a failed activation.
        self.normal: dict[str, set[str]] = {}
        for nid, node in graph.nodes.items():
            succ = set(graph.successors(nid))
            on_failure = getattr(node, "on_failure", None)
            if on_failure is not None and not _normal_edge(node, on_failure):
                succ.discard(on_failure)
            self.normal[nid] = succ
        self.terminal: Key | None = None
        """The terminal activation that ended the delivery, while it is current."""
        self._validators: dict[int, tuple[Any, Any]] = {}
        self.completed_refs: dict[tuple[Key, str], str] = {}
        """``((node, activation), record kind) -> digest`` of every completion so far."""

    # --- per event ------------------------------------------------------------------

    def check(self, state: ReplayState, event: Fields) -> None:
        """Raise the first graph rule ``event`` breaks (``state`` is before the event)."""
        where = event["ordinal"]
        transition = event["transition"]
        key: Key = (event["node"], event["activation"])
        if self.terminal is not None:
            if state.state_of(self.terminal).value != "completed":
                self.terminal = None  # a restart invalidated it: the delivery goes on
            elif transition not in _AFTER_TERMINAL or (
                transition == "work-failed"
                and (event["error"] or {}).get("code") != _SIBLING_STOPPED
            ):
                raise error(
                    ErrorCode.AUDIT_AFTER_TERMINAL,
                    f"{transition} of {key[0]}#{key[1]} after terminal "
                    f"{self.terminal[0]}#{self.terminal[1]} ended the delivery",
                    path=at(where),
                )
        node = self.graph.nodes[key[0]]
        if key not in state.activations or state.state_of(key).value == "pending":
            if transition in ("dependencies-satisfied", "work-started"):
                self._visit(state, key, node.max_visits, where)
        if transition == "dependencies-satisfied":
            self._dependencies(state, key, event["predecessors"], where)
        elif transition == "work-completed":
            self._completion(state, key, node, event, where)

    def _visit(self, state: ReplayState, key: Key, limit: int | None, where: int) -> None:
        if limit is None:
            return
        node = key[0]
        live = state.latest.get(node, 0) - state.retired.get(node, 0)
        if key in state.activations:
            live -= 1  # the start node's first activation exists before any event
        if live + 1 > limit:
            raise error(
                ErrorCode.AUDIT_MAX_VISITS_EXCEEDED,
                f"{node}#{key[1]} is visit {live + 1}; max_visits is {limit}",
                path=at(where),
                expected=f"at most {limit} visits",
            )

    def _dependencies(self, state: ReplayState, key: Key, preds: list[Fields], where: int) -> None:
        target = key[0]
        for ref in preds:
            source, number = ref["node"], ref["activation"]
            pred_state = state.state_of((source, number)).value
            if target not in self.normal.get(source, set()) and pred_state != "failed":
                raise error(
                    ErrorCode.AUDIT_UNDECLARED_EDGE,
                    f"{target} is {source}'s failure successor, but {source}#{number} "
                    f"is {pred_state}",
                    path=at(where),
                    expected="a failed activation",
                )
            if pred_state == "failed" and target in self.normal.get(source, set()):
                on_failure = getattr(self.graph.nodes[source], "on_failure", None)
                if on_failure != target:
                    raise error(
                        ErrorCode.AUDIT_UNDECLARED_EDGE,
                        f"{source}#{number} failed, and {target} is not its on_failure",
                        path=at(where),
                    )
            if pred_state == "completed":
                self._edge_taken(state, (source, number), target, where)
        barrier_of = self.barriers.get(target)
        if barrier_of is not None:
            self._barrier(state, barrier_of, target, preds, where)

    def _edge_taken(self, state: ReplayState, pred: Key, target: str, where: int) -> None:
        """A completed predecessor leads to ``target``: its route or its selection must say so."""
        node = self.graph.nodes[pred[0]]
        routes = getattr(node, "routes", None)
        if routes is not None and self.load is not None:
            value = self._output(state, pred, where)
            case = value.get(routes.port) if isinstance(value, dict) else None
            chosen = routes.cases.get(case) if isinstance(case, str) else None
            if chosen != target:
                raise error(
                    ErrorCode.AUDIT_ROUTE_MISMATCH,
                    f"{pred[0]}#{pred[1]} routed {routes.port}={case!r} to {chosen!r}, "
                    f"but {target} ran",
                    path=at(where),
                    expected=str(chosen),
                )
        if isinstance(node, ParallelNode) and self.load is not None:
            selected = self._selection(state, pred, where)
            if target not in selected:
                raise error(
                    ErrorCode.AUDIT_BRANCH_UNSELECTED,
                    f"branch {target} ran, but {pred[0]}#{pred[1]} selected " + ", ".join(selected),
                    path=at(where),
                )

    def _barrier(
        self, state: ReplayState, parallel: str, barrier: str, preds: list[Fields], where: int
    ) -> None:
        arrived: list[str] = []
        for ref in preds:
            region = self.regions.get(ref["node"])
            if region is None or region.barrier != barrier:
                raise error(
                    ErrorCode.AUDIT_BARRIER_MISMATCH,
                    f"{ref['node']} is on no branch of {parallel}",
                    path=at(where),
                )
            arrived.append(region.branch)
        if len(set(arrived)) != len(arrived):
            raise error(
                ErrorCode.AUDIT_BARRIER_MISMATCH,
                f"barrier {barrier} counted one branch twice: " + ", ".join(sorted(arrived)),
                path=at(where),
            )
        if self.load is None:
            return
        number = state.latest.get(NodeId(parallel), 0)
        selected = self._selection(state, (NodeId(parallel), number), where)
        if sorted(arrived) != sorted(selected):
            raise error(
                ErrorCode.AUDIT_BARRIER_MISMATCH,
                f"barrier {barrier} fired after {', '.join(sorted(arrived)) or 'nothing'}",
                path=at(where),
                expected="exactly the selected branches: " + ", ".join(sorted(selected)),
            )

    # --- completions and their records ---------------------------------------------

    def _completion(
        self, state: ReplayState, key: Key, node: Any, event: Fields, where: int
    ) -> None:
        refs = {(ref["kind"], ref["id"]): ref["digest"] for ref in event["refs"]}
        ident = f"{key[0]}#{key[1]}"
        needed: list[str] = []
        if isinstance(node, ActionNode | OperationNode | WaitNode):
            needed.append(_OUTPUT)
        if isinstance(node, WaitNode):
            needed.append(_CONDUCT)
        if isinstance(node, ParallelNode):
            needed.append(_SELECTION)
        for kind in needed:
            if (kind, ident) not in refs:
                raise error(
                    ErrorCode.AUDIT_RECORD_MISSING,
                    f"completion of {ident} does not reference its {kind} record",
                    path=at(where),
                    expected=f"a {kind}/{ident} reference",
                )
        if isinstance(node, TerminalNode):
            self.terminal = key
        if self.load is None:
            return
        if isinstance(node, ActionNode | OperationNode):
            self._ports(node, key, self.load(refs[(_OUTPUT, ident)], where), where)
        elif isinstance(node, WaitNode):
            value = self.load(refs[(_OUTPUT, ident)], where)
            self._schema(node.result, value, f"{ident} result", where)
            self._conduct(event, self.load(refs[(_CONDUCT, ident)], where), value, where)
        elif isinstance(node, ParallelNode):
            value = self.load(refs[(_SELECTION, ident)], where)
            self._check_selection(state, key, node, value, where)

    def _ports(self, node: Any, key: Key, value: Any, where: int) -> None:
        ports = output_ports(node)
        ident = f"{key[0]}#{key[1]}"
        if not isinstance(value, dict) or set(value) != set(ports):
            raise error(
                ErrorCode.AUDIT_RECORD_SCHEMA_VIOLATION,
                f"output of {ident} does not have exactly the declared ports",
                path=at(where),
                expected=", ".join(sorted(ports)),
            )
        for port, schema in ports.items():
            self._schema(schema, value[port], f"{ident}.{port}", where)

    def _schema(self, schema: Any, value: Any, what: str, where: int) -> None:
        # One validator per schema object of the admitted graph (the graph outlives the audit).
        validator = self._validators.get(id(schema))
        if validator is None:
            validator = self._validators[id(schema)] = (schema, validator_for(schema))
        if validator[1].is_valid(value):
            return
        problem = validation_problem(schema, value)
        if problem is not None:
            raise error(
                ErrorCode.AUDIT_RECORD_SCHEMA_VIOLATION,
                f"{what}{'.' + problem[0] if problem[0] else ''}: {problem[1]}"[:300],
                path=at(where),
            )

    def _conduct(self, event: Fields, conduct: Any, result: Any, where: int) -> None:
        """A wait's conduct record and approval records must say what the event says."""
        assert self.load is not None
        given = [
            {"actor": a["actor"], "role": a["role"], "record": a["record"]}
            for a in event["approvals"]
        ]
        if not isinstance(conduct, dict) or conduct.get("approvals") != given:
            raise error(
                ErrorCode.AUDIT_APPROVAL_MISMATCH,
                "the conduct record does not list the completion's approvals",
                path=at(where),
            )
        if conduct.get("result") != result:
            raise error(
                ErrorCode.AUDIT_APPROVAL_MISMATCH,
                "the conduct record's result is not the recorded result",
                path=at(where),
            )
        for approval in event["approvals"]:
            body = self.load(approval["record"]["digest"], where)
            if not isinstance(body, dict) or (body.get("actor"), body.get("role")) != (
                approval["actor"],
                approval["role"],
            ):
                raise error(
                    ErrorCode.AUDIT_APPROVAL_MISMATCH,
                    f"approval record of {approval['actor']!r} names another actor or role",
                    path=at(where),
                )

    def _selection(self, state: ReplayState, key: Key, where: int) -> list[str]:
        """The branches the parallel activation ``key`` selected (from its selection record)."""
        assert self.load is not None
        found = state.activations.get(key)
        if found is None or found.state is not STATE_OF["completed"]:
            raise error(
                ErrorCode.AUDIT_BRANCH_UNSELECTED,
                f"{key[0]}#{key[1]} has not completed a selection",
                path=at(where),
            )
        digest = self._ref(key, _SELECTION, where)
        value = self.load(digest, where)
        selected = value.get("selected") if isinstance(value, dict) else None
        if not isinstance(selected, list) or not all(isinstance(b, str) for b in selected):
            raise error(
                ErrorCode.AUDIT_SELECTION_INVALID,
                f"selection of {key[0]}#{key[1]} is not a list of branches",
                path=at(where),
            )
        return list(selected)

    def _check_selection(
        self, state: ReplayState, key: Key, node: ParallelNode, value: Any, where: int
    ) -> None:
        selected = value.get("selected") if isinstance(value, dict) else None
        branches = list(node.branches)
        problem = ""
        if not isinstance(selected, list) or not selected:
            problem = "is empty or not a list"
        elif len(set(map(str, selected))) != len(selected) or not set(selected) <= set(branches):
            problem = "is not a set of declared branches"
        elif not set(node.required) <= set(selected):
            problem = "omits a required branch (" + ", ".join(node.required) + ")"
        elif node.select is None and sorted(selected) != sorted(branches):
            problem = "is not every branch, and the node declares no select"
        elif node.select is not None:
            source, port = node.select.split(".", 1)
            number = state.latest.get(NodeId(source), 0)
            chosen = self._output(state, (NodeId(source), number), where).get(port)
            if not isinstance(chosen, list) or sorted(map(str, chosen)) != sorted(selected):
                problem = f"is not what {source}#{number}.{port} selected"
        if problem:
            raise error(
                ErrorCode.AUDIT_SELECTION_INVALID,
                f"selection of {key[0]}#{key[1]} {problem}",
                path=at(where),
            )

    def _output(self, state: ReplayState, key: Key, where: int) -> dict[str, Any]:
        assert self.load is not None
        value = self.load(self._ref(key, _OUTPUT, where), where)
        return value if isinstance(value, dict) else {}

    def _ref(self, key: Key, kind: str, where: int) -> str:
        """The digest ``key``'s completion referenced for ``kind`` (already checked present)."""
        digest = self.completed_refs.get((key, kind))
        if digest is None:
            raise error(
                ErrorCode.AUDIT_RECORD_MISSING,
                f"{key[0]}#{key[1]} has no {kind} record",
                path=at(where),
            )
        return digest

    def applied(self, event: Fields) -> None:
        """Remember what a completion referenced (called after the event is folded in).

        Only with records: nothing else reads ``completed_refs``.
        """
        if event["transition"] == "work-completed" and self.load is not None:
            key = (event["node"], event["activation"])
            for ref in event["refs"]:
                self.completed_refs[(key, ref["kind"])] = ref["digest"]


def _normal_edge(node: Any, target: str) -> bool:
    """Whether ``target`` is also reached by a non-failure edge of ``node``."""
    if getattr(node, "next", None) == target:
        return True
    routes = getattr(node, "routes", None)
    return routes is not None and target in routes.cases.values()
