"""Shared Hypothesis strategies for execution-system tests.

Import as ``from tests.strategies import control_graphs`` (``tests`` is a
package; pytest puts the repository root on ``sys.path``).

Everything generated is plain JSON-native data (dicts, lists, str, int, bool),
never a model, so a test can serialize it, mutate it, or feed it to admission.

``control_graphs()`` draws *admissible* control graphs built from segments
chained from ``start`` to a terminal:

* steps: action or operation nodes with typed output ports, optional retry,
  ``on_failure`` to a terminal, write access with path prefixes;
* routes: an enum port whose cases lead on or to a terminal;
* waits: approval/decision/workflow-result, with ``next`` or ``routes`` on a
  required enum property of the result;
* parallel regions: 1-4 branches of 1-3 nodes each, all branches or a
  ``select``-ed subset (with or without ``required``), joined by one barrier;
* loops: a node with ``max_visits`` (on the looping node or on its target)
  routing back to the head of an earlier segment.

Reads follow the admission rules: a plain read only of what completed on every
path (earlier segments, earlier nodes of the same branch, branches that run in
every round), ``?`` reads of any declared port of any node, plain reads of
required input fields. Node declaration order is shuffled.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

JsonDict = dict[str, Any]

SPEC_VERSION = "execution-system/v1"
#: Operations every Host registers (mirrors ``host.OPERATIONS``; kept literal so
#: this module stays independent of the layer under test).
DEFAULT_OPERATIONS: tuple[str, ...] = ("echo", "all-true", "any-true", "count-present")

#: Port schemas used for outputs and input fields, each with an instance.
SCHEMA_PALETTE: tuple[tuple[Any, Any], ...] = (
    ({"type": "string"}, "text"),
    ({"type": "string", "minLength": 1, "maxLength": 80}, "t"),
    ({"type": "boolean"}, True),
    ({"type": "integer", "minimum": 0}, 0),
    ({"type": "number", "exclusiveMaximum": 10}, 1.5),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, []),
    ({"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]}, {"k": "v"}),
    ({"type": "string", "format": "uuid"}, "6b1e8c1e-6f5b-4f43-9d2a-7d5f3c1b2a10"),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, None),
    (True, "anything"),
)

port_schemas = st.sampled_from([schema for schema, _ in SCHEMA_PALETTE]).map(copy.deepcopy)
"""Schemas from :data:`SCHEMA_PALETTE`, each a fresh copy (shared objects would make
``yaml.safe_dump`` emit anchors, which the loader refuses)."""

_WORDS = ("approve", "rework", "ship", "hold", "retry", "done", "left", "right", "yes", "no")

_LOWER = "abcdefghijklmnopqrstuvwxyz"

identifiers = st.builds(
    operator.add, st.sampled_from(_LOWER), st.text(_LOWER + "0123456789_", max_size=7)
)
"""Short names valid as node ids, port names and input names."""

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**31), max_value=2**31),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=12),
)
"""JSON scalars (no NaN or infinities)."""

json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
"""Arbitrary small JSON documents."""


def instance_of(schema: Any) -> Any:
    """Return an instance valid against a schema of :data:`SCHEMA_PALETTE`."""
    for known, instance in SCHEMA_PALETTE:
        if known == schema:
            return instance
    if isinstance(schema, dict) and "enum" in schema:
        return schema["enum"][0]
    raise ValueError(f"no known instance for {schema!r}")


def minimal_input(document: JsonDict) -> JsonDict:
    """A delivery input valid against a generated graph's input schema (required fields only)."""
    schema = document.get("input", {"type": "object"})
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    required = schema.get("required", []) if isinstance(schema, dict) else []
    return {name: instance_of(props[name]) for name in required}


class _Builder:
    """Accumulates nodes and dangling successor slots while segments are drawn."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any], operations: Sequence[str]):
        self.draw = draw
        self.operations = tuple(operations)
        self.nodes: dict[str, JsonDict] = {}
        self.counter = 0
        self.terminals: set[str] = {"done"}
        # Slots waiting for the next segment's head: (mapping, key).
        self.pending: list[tuple[JsonDict, str]] = []
        # Node -> (plain-readable refs at that node) for steps whose inputs are drawn last.
        self.readers: dict[str, list[str]] = {}
        self.heads: list[str] = []
        self.guaranteed: list[str] = []

    def fresh(self) -> str:
        self.counter += 1
        return f"n{self.counter}"

    def terminal(self) -> str:
        name = self.draw(st.sampled_from(["done", "failed", "blocked"]))
        self.terminals.add(name)
        return str(name)

    def ports(self, max_ports: int = 3) -> JsonDict:
        names = self.draw(st.lists(identifiers, max_size=max_ports, unique=True))
        return {name: self.draw(port_schemas) for name in names}

    def step(self, *, readable: list[str]) -> tuple[str, JsonDict]:
        nid = self.fresh()
        kind = self.draw(st.sampled_from(["action", "action", "operation"]))
        node: JsonDict = {"kind": kind}
        if kind == "action":
            node["executor"] = self.draw(st.sampled_from(["planner", "worker", "reviewer"]))
            if self.draw(st.booleans()):
                node["workspace"] = "write"
                if self.draw(st.booleans()):
                    node["paths"] = self.draw(
                        st.lists(st.sampled_from(["src/", "tests/", "docs"]), min_size=1)
                    )
        else:
            node["operation"] = self.draw(st.sampled_from(self.operations))
        outputs = self.ports()
        if outputs:
            node["outputs"] = outputs
        if self.draw(st.integers(0, 4)) == 0:
            node["retry"] = {"max_attempts": self.draw(st.integers(1, 5)), "backoff_s": 0.5}
        if self.draw(st.integers(0, 4)) == 0:
            node["on_failure"] = self.terminal()
        if self.draw(st.integers(0, 6)) == 0:
            node["description"] = self.draw(st.text(max_size=20))
        self.nodes[nid] = node
        self.readers[nid] = list(readable)
        return nid, node

    def provides(self, nid: str) -> list[str]:
        node = self.nodes[nid]
        if node["kind"] == "wait":
            return [f"{nid}.{p}" for p in node["result"].get("required", [])]
        return [f"{nid}.{p}" for p in node.get("outputs", {})]

    # --- segments -----------------------------------------------------------

    def seg_step(self) -> str:
        nid, node = self.step(readable=self.guaranteed)
        self.pending.append((node, "next"))
        self.guaranteed = self.guaranteed + self.provides(nid)
        return nid

    def seg_route(self) -> str:
        nid, node = self.step(readable=self.guaranteed)
        values = self.draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3, unique=True))
        port = self.draw(identifiers.filter(lambda p: p not in node.get("outputs", {})))
        node.setdefault("outputs", {})[port] = {"enum": values}
        cases: JsonDict = {}
        for i, value in enumerate(values):
            if i == 0 or self.draw(st.booleans()):
                self.pending.append((cases, value))
            else:
                cases[value] = self.terminal()
        node["routes"] = {"port": port, "cases": cases}
        self.guaranteed = self.guaranteed + self.provides(nid)
        return nid

    def seg_wait(self) -> str:
        nid = self.fresh()
        props = self.ports()
        required = [p for p in props if self.draw(st.booleans())]
        node: JsonDict = {
            "kind": "wait",
            "wait": self.draw(st.sampled_from(["approval", "decision", "workflow-result"])),
            "authority": {
                "roles": self.draw(
                    st.lists(st.sampled_from(["maintainer", "lead", "qa"]), min_size=1, unique=True)
                ),
                "min_count": self.draw(st.integers(1, 3)),
                "distinct_actors": self.draw(st.booleans()),
            },
        }
        if self.draw(st.booleans()):
            values = self.draw(
                st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3, unique=True)
            )
            port = self.draw(identifiers.filter(lambda p: p not in props))
            props[port] = {"enum": values}
            required.append(port)
            cases: JsonDict = {}
            for i, value in enumerate(values):
                if i == 0 or self.draw(st.booleans()):
                    self.pending.append((cases, value))
                else:
                    cases[value] = self.terminal()
            node["routes"] = {"port": port, "cases": cases}
        else:
            self.pending.append((node, "next"))
        result: JsonDict = {"type": "object", "properties": props}
        if required:
            result["required"] = required
        node["result"] = result
        self.nodes[nid] = node
        self.guaranteed = self.guaranteed + self.provides(nid)
        return nid

    def seg_parallel(self) -> str:
        width = self.draw(st.integers(1, 4))
        use_select = self.draw(st.booleans())
        head: str | None = None
        before = list(self.guaranteed)
        planner: str | None = None
        if use_select:
            planner, _ = self.step(readable=before)
            head = planner
        pid = self.fresh()
        bid = self.fresh()
        branches: list[str] = []
        always: list[str] = []
        region_refs: list[str] = []
        branch_nodes: list[list[str]] = []
        inside = before + ([f"{planner}.pick"] if planner else [])
        for _ in range(width):
            length = self.draw(st.integers(1, 3))
            seen = list(inside)
            chain: list[str] = []
            for _ in range(length):
                nid, _ = self.step(readable=seen)
                if chain:
                    self.nodes[chain[-1]]["next"] = nid
                chain.append(nid)
                seen = seen + self.provides(nid)
            self.nodes[chain[-1]]["next"] = bid
            branches.append(chain[0])
            branch_nodes.append(chain)
        required: list[str] = []
        if self.draw(st.booleans()):
            required = self.draw(st.lists(st.sampled_from(branches), unique=True))
        parallel: JsonDict = {"kind": "parallel", "branches": branches, "barrier": bid}
        if required:
            parallel["required"] = required
        if planner is not None:
            extra = self.draw(st.lists(st.sampled_from(branches), unique=True))
            names = list(dict.fromkeys(required + extra)) or [branches[0]]
            self.nodes[planner].setdefault("outputs", {})["pick"] = {
                "type": "array",
                "items": {"enum": names},
                "uniqueItems": True,
            }
            self.nodes[planner]["next"] = pid
            parallel["select"] = f"{planner}.pick"
            always = required
        else:
            always = branches
        self.nodes[pid] = parallel
        barrier: JsonDict = {"kind": "barrier"}
        self.nodes[bid] = barrier
        self.pending.append((barrier, "next"))
        for branch, chain in zip(branches, branch_nodes, strict=True):
            if branch in always:
                for nid in chain:
                    region_refs.extend(self.provides(nid))
        after = inside + region_refs
        if planner is not None:
            after = after + self.provides(planner)
        self.guaranteed = list(dict.fromkeys(after))
        return head if head is not None else pid

    def seg_loop(self) -> str | None:
        if not self.heads:
            return None
        target = self.draw(st.sampled_from(self.heads))
        nid, node = self.step(readable=self.guaranteed)
        port = self.draw(identifiers.filter(lambda p: p not in node.get("outputs", {})))
        again, leave = self.draw(
            st.lists(st.sampled_from(_WORDS), min_size=2, max_size=2, unique=True)
        )
        node.setdefault("outputs", {})[port] = {"enum": [again, leave]}
        cases: JsonDict = {again: target}
        node["routes"] = {"port": port, "cases": cases}
        self.pending.append((cases, leave))
        bound = self.draw(st.integers(1, 20))
        if self.draw(st.booleans()):
            node["max_visits"] = bound
        else:
            self.nodes[target]["max_visits"] = bound
        self.guaranteed = self.guaranteed + self.provides(nid)
        return nid

    def connect(self, head: str) -> None:
        for mapping, key in self.pending:
            mapping[key] = head
        self.pending = []


@st.composite
def control_graphs(
    draw: Callable[[st.SearchStrategy[Any]], Any],
    *,
    min_segments: int = 1,
    max_segments: int = 6,
    operations: Sequence[str] = DEFAULT_OPERATIONS,
) -> JsonDict:
    """Draw an admissible control-graph document (a plain dict; see the module docstring)."""
    builder = _Builder(draw, operations)
    fields = draw(st.lists(identifiers, max_size=4, unique=True))
    in_props = {f: draw(port_schemas) for f in fields}
    in_required = [f for f in fields if draw(st.booleans())]
    kinds = draw(
        st.lists(
            st.sampled_from(["step", "route", "wait", "parallel", "loop"]),
            min_size=min_segments,
            max_size=max_segments,
        )
    )
    start: str | None = None
    for kind in kinds:
        make = {
            "step": builder.seg_step,
            "route": builder.seg_route,
            "wait": builder.seg_wait,
            "parallel": builder.seg_parallel,
            "loop": builder.seg_loop,
        }[kind]
        pending = builder.pending
        builder.pending = []
        head = make()
        if head is None:
            builder.pending = pending
            continue
        for mapping, key in pending:
            mapping[key] = head
        builder.heads.append(head)
        start = start or head
    builder.connect("done")

    # Reads, drawn once every port is known.
    all_ports = [f"{nid}.{p}" for nid in builder.nodes for p in _ports_of(builder.nodes[nid])]
    for nid, plain in builder.readers.items():
        options = (
            [("plain", r) for r in plain]
            + [("optional", r) for r in all_ports]
            + [("plain", f"input.{f}") for f in in_required]
            + [("optional", f"input.{f}") for f in fields]
        )
        if not options:
            continue
        picks = draw(st.lists(st.sampled_from(options), max_size=3))
        inputs = {}
        for i, (mode, ref) in enumerate(picks):
            inputs[f"i{i}"] = ref + ("?" if mode == "optional" else "")
        if inputs:
            builder.nodes[nid]["inputs"] = inputs

    nodes = dict(builder.nodes)
    outcomes = {"done": "succeeded", "failed": "failed", "blocked": "blocked"}
    for name in sorted(builder.terminals):
        nodes[name] = {"kind": "terminal", "outcome": outcomes[name]}
    order = draw(st.permutations(list(nodes)))
    document: JsonDict = {
        "spec": SPEC_VERSION,
        "graph": draw(
            st.builds(
                operator.add, st.sampled_from(_LOWER), st.text(_LOWER + "0123456789.-", max_size=15)
            )
        ),
        "start": start or "done",
        "nodes": {nid: nodes[nid] for nid in order},
    }
    if fields:
        schema: JsonDict = {"type": "object", "properties": in_props}
        if in_required:
            schema["required"] = in_required
        document["input"] = schema
    return document


def _ports_of(node: JsonDict) -> list[str]:
    if node["kind"] == "wait":
        return list(node["result"].get("properties", {}))
    return list(node.get("outputs", {}))


# --- hostile input -------------------------------------------------------------

hostile_scalars = st.one_of(
    json_scalars,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(st.characters(codec="utf-8"), max_size=16),
    st.sampled_from(["\x1b[2J", "a\x00b", "\r\nexecsys: FORGED", "\u202e", "\ud800"]),
)
"""Scalars a careless or hostile producer sends: huge integers, NaN, infinities, controls."""

hostile_values = st.recursive(
    hostile_scalars | st.builds(set) | st.binary(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=3)
    ),
    max_leaves=10,
)
"""Values that may not be JSON at all (sets, bytes, integer keys) or sit at its edges."""

catastrophic_patterns = st.sampled_from(
    ["^(a+)+$", "(a|aa)+$", "^(a|a?)+$", "(.*a){12}", "^(\\w+\\s?)*$", "(x+x+)+y"]
)
"""Patterns that take exponential time in a backtracking engine."""

patterns = st.one_of(
    catastrophic_patterns,
    st.text(st.sampled_from("ab()[]{}*+?|^$.\\-,0123456789wsdSbB=!<:PLu"), max_size=12),
)
"""Regular expressions, valid or not, linear or not (in a backtracking engine)."""

store_urls = st.one_of(
    st.text(max_size=40),
    st.builds(
        operator.add,
        st.sampled_from(
            [
                "sqlite:",
                "sqlite:/",
                "sqlite://",
                "sqlite:///",
                "sqlite:////",
                "postgresql://",
                "postgres://",
                "file:",
                "mysql://",
                "SQLITE:///",
                " sqlite:///",
            ]
        ),
        st.text(st.characters(codec="utf-8"), max_size=30)
        | st.sampled_from([":memory:", "x.db?mode=ro", "a#b", "", "/", "..", "x\x00y"]),
    ),
)
"""Store URLs as people mistype them."""
