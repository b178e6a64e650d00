"""The control-graph spec: the document a user writes, as frozen models.

These models check shape only (keys, types, value ranges). Whether the graph
they describe is admissible (successors declared, routes covering their enum,
dataflow guaranteed, cycles bounded, ...) is decided by admission in
``execution_system``; the rules are listed in ``docs/spec.md``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SPEC_VERSION = "execution-system/v1"

NODE_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
_NODE_ID = re.compile(NODE_ID_PATTERN)
_PORT = r"[A-Za-z_][A-Za-z0-9_-]{0,63}"
#: ``input.<field>`` or ``<node>.<port>``, optionally suffixed by ``?``.
REFERENCE_PATTERN = rf"^(?:input|[A-Za-z_][A-Za-z0-9_-]{{0,63}})\.{_PORT}\??$"
#: ``<node>.<port>`` without ``?`` (used by ``select``).
PORT_REFERENCE_PATTERN = rf"^[A-Za-z_][A-Za-z0-9_-]{{0,63}}\.{_PORT}$"

RESERVED_NODE_IDS = frozenset({"input", "__start__", "__end__"})

JsonSchema = dict[str, Any] | bool
"""A JSON Schema (Draft 2020-12) document; checked by ``contracts.check_schema``."""


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", strict=True)


NodeRef = Annotated[str, Field(pattern=NODE_ID_PATTERN)]
"""A reference to a node id declared in the same graph."""


class Routes(_Frozen):
    """Route on the value of one enum output port: each value names its successor."""

    port: Annotated[str, Field(pattern=rf"^{_PORT}$")]
    """The output port whose value picks the successor; its schema must be an enum."""
    cases: dict[str, NodeRef] = Field(min_length=1)
    """Port value -> successor node; must cover exactly the port's enum values."""


class RetryPolicy(_Frozen):
    """Retry of retryable failures (non-retryable ones follow ``on_failure``)."""

    max_attempts: int = Field(ge=1, le=100)
    """Attempts in all, the first included."""
    backoff_s: float = Field(default=0.0, ge=0.0, le=3600.0)
    """Delay before the second attempt, in seconds."""
    multiplier: float = Field(default=2.0, ge=1.0, le=10.0)
    """Factor applied to the delay after each further attempt."""
    max_backoff_s: float = Field(default=60.0, ge=0.0, le=3600.0)
    """Upper bound of any single delay, in seconds."""


class _Base(_Frozen):
    description: str | None = None
    """Free text for people; never interpreted."""
    max_visits: int | None = Field(default=None, ge=1, le=10_000)
    """Upper bound on activations of this node in one delivery; bounds cycles through it."""


class _Step(_Base):
    inputs: dict[str, Annotated[str, Field(pattern=REFERENCE_PATTERN)]] = Field(
        default_factory=dict
    )
    """Input name -> ``input.<field>`` or ``<node>.<port>`` (``?`` suffix: optional read)."""
    outputs: dict[Annotated[str, Field(pattern=rf"^{_PORT}$")], JsonSchema] = Field(
        default_factory=dict
    )
    """Output port -> JSON Schema; every declared port must be produced."""
    next: NodeRef | None = None
    """The single successor (exclusive with ``routes``)."""
    routes: Routes | None = None
    """Successor chosen by an enum output port (exclusive with ``next``)."""
    retry: RetryPolicy | None = None
    """How retryable failures are retried; absent means one attempt."""
    on_failure: NodeRef | None = None
    """Successor after a non-retryable failure (or exhausted retries)."""


class ActionNode(_Step):
    """Invokes an executor bound by the runner config."""

    kind: Literal["action"]
    executor: Annotated[str, Field(pattern=rf"^{_PORT}$")]
    """Name of the executor binding that performs this action."""
    workspace: Literal["read", "write"] = "read"
    """Workspace access granted to the executor by its capability."""
    paths: tuple[str, ...] | None = None
    """With ``workspace: write``: the relative path prefixes it may change."""
    protect: tuple[str, ...] = ()
    """Relative path prefixes the action may never change (e.g. the tests that judge it)."""

    @field_validator("paths", "protect")
    @classmethod
    def _relative_prefixes(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return value
        for prefix in value:
            parts = prefix.replace("\\", "/").split("/")
            if not prefix or prefix.startswith("/") or ".." in parts:
                raise ValueError(f"path prefix {prefix!r} must be relative and without '..'")
        return value


class OperationNode(_Step):
    """Runs a registered, Host-owned deterministic function."""

    kind: Literal["operation"]
    operation: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")]
    """Name of the registered operation."""


class ParallelNode(_Base):
    """Fans out to a declared set of branches, all or a selected subset."""

    kind: Literal["parallel"]
    branches: tuple[NodeRef, ...] = Field(min_length=1)
    """Head node of each branch; every branch ends at ``barrier``."""
    select: Annotated[str, Field(pattern=PORT_REFERENCE_PATTERN)] | None = None
    """``<node>.<port>`` holding the selected branch names; absent selects all."""
    required: tuple[NodeRef, ...] = ()
    """Branches whose failure fails the region when they are selected."""
    barrier: NodeRef
    """The barrier node that joins exactly the selected branches."""


class BarrierNode(_Base):
    """Joins the branches selected by its parallel node, exactly once per round."""

    kind: Literal["barrier"]
    next: NodeRef
    """The successor once every selected branch has arrived."""


class WaitAuthority(_Frozen):
    """Who may resolve a workflow wait."""

    roles: tuple[Annotated[str, Field(min_length=1, max_length=64)], ...] = Field(min_length=1)
    """Roles (from the delivery's authority policy) admitted to resolve it."""
    min_count: int = Field(default=1, ge=1, le=100)
    """How many admitted approvals are needed before the wait resolves."""
    distinct_actors: bool = True
    """Whether every approval must come from a different actor."""


class WaitNode(_Base):
    """Waits for an approval, decision or workflow result from an admitted actor."""

    kind: Literal["wait"]
    wait: Literal["approval", "decision", "workflow-result"]
    """What kind of control result is awaited."""
    result: JsonSchema
    """JSON Schema of the result; its top-level properties are the node's output ports."""
    authority: WaitAuthority
    """Roles, count and distinctness required to resolve the wait."""
    next: NodeRef | None = None
    """The single successor (exclusive with ``routes``)."""
    routes: Routes | None = None
    """Successor chosen by an enum property of the result (exclusive with ``next``)."""


class TerminalNode(_Base):
    """Ends the delivery with an outcome."""

    kind: Literal["terminal"]
    outcome: Literal["succeeded", "failed", "blocked"]
    """The delivery's outcome when this node is reached."""


Node = Annotated[
    ActionNode | OperationNode | ParallelNode | BarrierNode | WaitNode | TerminalNode,
    Field(discriminator="kind"),
]
"""Any node of a control graph, discriminated by ``kind``."""

NODE_KINDS = ("action", "operation", "parallel", "barrier", "wait", "terminal")


class ControlGraph(_Frozen):
    """A closed control graph: static topology, dynamic path."""

    spec: Literal["execution-system/v1"]
    """Spec format version."""
    graph: Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")]
    """Name of the graph."""
    description: str | None = None
    """Free text for people; never interpreted."""
    input: JsonSchema = Field(default_factory=lambda: {"type": "object"})
    """JSON Schema of the delivery input."""
    start: NodeRef
    """The first node."""
    nodes: dict[Annotated[str, Field(pattern=NODE_ID_PATTERN)], Node] = Field(min_length=1)
    """Node id -> node."""

    def successors(self, node_id: str) -> list[str]:
        """Every declared successor of ``node_id`` (next, routes, on_failure, branches)."""
        node = self.nodes[node_id]
        found: list[str] = []
        if isinstance(node, ActionNode | OperationNode | WaitNode):
            if node.next is not None:
                found.append(node.next)
            if node.routes is not None:
                found.extend(node.routes.cases.values())
        if isinstance(node, ActionNode | OperationNode) and node.on_failure is not None:
            found.append(node.on_failure)
        if isinstance(node, ParallelNode):
            found.extend(node.branches)
        if isinstance(node, BarrierNode):
            found.append(node.next)
        return list(dict.fromkeys(found))


def output_ports(node: Any) -> dict[str, JsonSchema]:
    """The output ports of a node (a wait's ports are its result's properties)."""
    if isinstance(node, ActionNode | OperationNode):
        return dict(node.outputs)
    if isinstance(node, WaitNode) and isinstance(node.result, dict):
        props = node.result.get("properties")
        if isinstance(props, dict):
            return {str(k): v for k, v in props.items()}
    return {}


def is_node_id(text: str) -> bool:
    """Whether ``text`` is a syntactically valid node id."""
    return bool(_NODE_ID.match(text))


class Reference(_Frozen):
    """A parsed dataflow reference (``input.ticket``, ``plan.checks``, ``lint.ok?``)."""

    source: str
    """``input`` or the producing node id."""
    port: str
    """The input field or output port."""
    optional: bool
    """Whether the read tolerates absence (``?``)."""

    @classmethod
    def parse(cls, text: str) -> Reference:
        """Parse a reference that already matched ``REFERENCE_PATTERN``."""
        optional = text.endswith("?")
        source, port = text.rstrip("?").split(".", 1)
        return cls(source=source, port=port, optional=optional)
