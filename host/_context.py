"""What a node handler needs besides the thread state, and how it writes a step."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from contracts import (
    ActionNode,
    AdmittedDelivery,
    BarrierNode,
    ControlGraph,
    Custody,
    DeliveryId,
    ErrorCode,
    NodeState,
    TerminalNode,
    Transition,
    digest_of,
)
from contracts._invocation import Invoker
from contracts._status import DeliveryStatus
from contracts._topology import Region, region_index
from host._launches import launch_record
from host._operations import Operation
from host._outbox import OutboxItem

HOST_ACTOR = {"id": "host", "kind": "automation", "role": "host"}


@dataclass
class CompiledGraphInfo:
    """Per-graph facts computed once at compile time."""

    graph: ControlGraph
    regions: dict[str, Region]
    """Node -> the branch region it belongs to."""
    back_edges: frozenset[tuple[str, str]] = frozenset()
    """Edges that close a cycle (DFS from start): taking one starts a new round."""
    _downstream: dict[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, graph: ControlGraph) -> CompiledGraphInfo:
        """Compute the facts for ``graph``."""
        return cls(graph=graph, regions=region_index(graph), back_edges=_back_edges(graph))

    def downstream(self, node: str) -> frozenset[str]:
        """Every node reachable from ``node`` (itself included when on a cycle)."""
        found = self._downstream.get(node)
        if found is None:
            seen: set[str] = set()
            stack = list(self.graph.successors(node))
            while stack:
                current = stack.pop()
                if current in seen:
                    continue
                seen.add(current)
                stack.extend(self.graph.successors(current))
            found = frozenset(seen)
            self._downstream[node] = found
        return found


def _back_edges(graph: ControlGraph) -> frozenset[tuple[str, str]]:
    """Edges u -> v where v is on the DFS path to u (iterative: graphs can be deep)."""
    found: set[tuple[str, str]] = set()
    on_path: set[str] = {graph.start}
    done: set[str] = set()
    work = [(graph.start, iter(graph.successors(graph.start)))]
    while work:
        node, children = work[-1]
        child = next(children, None)
        if child is None:
            work.pop()
            on_path.discard(node)
            done.add(node)
        elif child in on_path:
            found.add((node, child))
        elif child not in done and child in graph.nodes:
            on_path.add(child)
            work.append((child, iter(graph.successors(child))))
    return frozenset(found)


CUSTODY_ON_LOOP_S = 0.02
"""A validation that took longer than this sends the next one to a worker thread."""


class StopSignal(asyncio.Event):
    """An event that also resolves one future when set, for racing a turn against it.

    Racing an executor call against ``wait()`` needs a task per call; the future
    is made once per delivery and can be awaited by any number of calls.
    """

    def __init__(self) -> None:
        super().__init__()
        self._future: asyncio.Future[None] | None = None

    def future(self) -> asyncio.Future[None]:
        """Done once the event is set (made on first use, on the running loop)."""
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
            if self.is_set():
                self._future.set_result(None)
        return self._future

    def set(self) -> None:
        super().set()
        if self._future is not None and not self._future.done():
            self._future.set_result(None)

    def clear(self) -> None:
        super().clear()
        if self._future is not None and self._future.done():
            self._future = None


@dataclass
class DeliveryContext:
    """Everything a node handler of one delivery may use (never checkpointed)."""

    delivery: AdmittedDelivery
    info: CompiledGraphInfo
    custody: Custody
    invoker: Invoker
    operations: Mapping[str, Operation]
    load_record: Callable[[str], Any]
    """digest -> value, from the cache or the store."""
    cache_record: Callable[[str, Any], None]
    stop: StopSignal = field(default_factory=StopSignal)
    """Set when a terminal is reached or a stop is requested: in-flight turns end."""
    stop_reason: str = ""
    """Why ``stop`` was set: terminal, failed, intervention, stop (an operator), or
    handback (a draining runner's grace ran out: turns in flight end, decision 0134)."""
    drain: bool = False
    """Set when the runner shuts down: no node starts from now on (decision 0132)."""
    handed_back: bool = False
    """Set when a node was halted because of ``drain``: the delivery goes back to the queue."""
    stop_request: dict[str, str] = field(default_factory=dict)
    """For an operator's stop: ``actor`` and ``reason`` (journaled on what it halts)."""
    sleep: Callable[[float], Any] = asyncio.sleep
    interrupted: dict[str, dict[str, Any]] = field(default_factory=dict)
    """node -> the directive that re-dispatches its interrupted attempt (recovery only)."""
    alone: Callable[[], bool] = field(default=lambda: False)
    """Whether this is the only delivery its process drives now (see ``custody_on_loop``)."""
    custody_s: float = 0.0
    """How long the delivery's last custody validation took, in seconds."""
    fresh: bool = False
    """Set by the operation that admitted the delivery: its thread has no checkpoint yet."""

    def custody_on_loop(self) -> bool:
        """Whether custody's validation may run on the event loop's thread (decision 0139).

        Only for the only delivery its process drives, and only while its
        validations are quick: the hop to a worker thread then costs more than
        anything it could overlap, and a long one (a large workspace) goes back
        to a thread so the loop keeps serving timers, signals and requests.
        """
        return self.custody_s < CUSTODY_ON_LOOP_S and self.alone()

    @cached_property
    def delivery_id(self) -> DeliveryId:
        """The delivery id (computed once: it digests the whole delivery document)."""
        return self.delivery.delivery_id


def invocation_id(delivery: str, node: str, activation: int, attempt: int) -> str:
    """Deterministic invocation id: a re-run of a crashed step reuses it (idempotency key)."""
    raw = f"{delivery}/{node}/{activation}/{attempt}".encode()
    return "inv-" + hashlib.sha256(raw).hexdigest()[:24]


class StepWriter:
    """Collects one node's writes for one super-step."""

    def __init__(self, ctx: DeliveryContext, state: Mapping[str, Any], node: str) -> None:
        self.ctx = ctx
        self.state = state
        self.node = node
        self.updates: dict[str, dict[str, Any]] = {}
        self.outbox: list[OutboxItem] = []
        self.goto: list[str] = []

    def put(self, channel: str, key: str, value: Any) -> None:
        """Write ``value`` under ``key`` of a merged channel (``None`` deletes)."""
        self.updates.setdefault(channel, {})[key] = value

    def current(self, channel: str, key: str) -> Any:
        """The value as this step sees it: its own write, else committed state."""
        pending = self.updates.get(channel, {})
        if key in pending:
            return pending[key]
        return (self.state.get(channel) or {}).get(key)

    def record(self, value: Any) -> str:
        """Store ``value`` content-addressed; return its digest."""
        digest = digest_of(value)
        self.ctx.cache_record(digest, value)
        self.outbox.append({"type": "record", "digest": digest, "value": value})
        return digest

    def event(
        self,
        node: str,
        activation: int,
        transition: Transition,
        prior: NodeState,
        result: NodeState,
        *,
        attempt: int | None = None,
        refs: list[dict[str, str]] | None = None,
        predecessors: list[list[Any]] | None = None,
        error: Mapping[str, str] | None = None,
        approvals: list[dict[str, Any]] | None = None,
        actor: Mapping[str, str] | None = None,
        authorization: Mapping[str, str] | None = None,
        rationale: str = "",
        request: str = "",
    ) -> None:
        """Queue a journal transition draft; the saver chains it at commit."""
        self.outbox.append(
            {
                "type": "event",
                "request": request or f"{node}/{activation}/{transition}/{attempt or 0}",
                "node": node,
                "activation": activation,
                # Plain strings: channel values stay JSON-native.
                "transition": str(transition),
                "prior": str(prior),
                "result": str(result),
                "attempt": attempt,
                "refs": refs or [],
                "predecessors": predecessors or [],
                "error": dict(error) if error else None,
                "approvals": approvals or [],
                "actor": dict(actor or HOST_ACTOR),
                "authorization": dict(authorization) if authorization else None,
                "rationale": rationale,
            }
        )

    def status(
        self, status: DeliveryStatus | str, *, outcome: str | None = None, message: str = ""
    ) -> None:
        """Set the delivery's run status."""
        self.put("run", "status", str(status))  # a plain string: channel values stay JSON
        self.put("run", "outcome", outcome if outcome is not None else "")
        self.put("run", "message", message)

    def schedule(self, target: str, predecessor: tuple[str, int]) -> None:
        """Make ``target`` run next, as a new activation caused by ``predecessor``."""
        graph = self.ctx.info.graph
        node = graph.nodes[target]
        if isinstance(node, BarrierNode):
            region = self.ctx.info.regions.get(predecessor[0])
            if region is not None:
                info = self.current("regions", region.parallel) or {}
                self.put("marks", f"{region.parallel}/{region.branch}", info.get("round", 0))
                self.put(
                    "marks",
                    f"{region.parallel}/{region.branch}#tail",
                    [predecessor[0], predecessor[1]],
                )
            if target not in self.goto:
                self.goto.append(target)
            return
        if isinstance(node, TerminalNode):
            # The delivery ends with the next super-step; branches still running in this
            # one would hold that step open, so they are stopped now (and recorded).
            self.ctx.stop_reason = self.ctx.stop_reason or "terminal"
            self.ctx.stop.set()
        activation, visit = self.next_activation(target)
        if (predecessor[0], target) in self.ctx.info.back_edges:
            # Taking a loop's back edge starts a new round: whatever this node and every
            # node after it produced in the earlier round is no longer current.
            outputs = self.state.get("outputs") or {}
            for stale in (self.ctx.info.downstream(target) | {target}) & set(outputs):
                self.put("outputs", stale, None)
        site: dict[str, Any] = {
            "activation": activation,
            "visit": visit,
            "attempt": 1,
            "turn": 1,
            "predecessors": [[predecessor[0], predecessor[1]]],
        }
        if isinstance(node, ActionNode) and (node.max_visits is None or visit <= node.max_visits):
            site = self.dispatch(target, site)
        self.put("pending", target, site)
        if target not in self.goto:
            self.goto.append(target)

    def journal_start(
        self,
        node: str,
        site: Mapping[str, Any],
        *,
        refs: list[dict[str, str]] | None = None,
        authorization: Mapping[str, str] | None = None,
        actor: Mapping[str, str] | None = None,
        rationale: str = "",
    ) -> None:
        """Journal an activation's attempt becoming active (and what made it ready)."""
        activation = int(site["activation"])
        attempt = int(site.get("attempt", 1))
        preds = site.get("predecessors") or []
        if attempt == 1:
            # The start node begins ready: on its first activation, and on the first one
            # after a restart invalidated all of its earlier ones (no predecessor either way).
            if not (node == self.ctx.info.graph.start and not preds):
                self.event(
                    node,
                    activation,
                    Transition.DEPENDENCIES_SATISFIED,
                    NodeState.PENDING,
                    NodeState.READY,
                    predecessors=preds,
                )
        else:
            if authorization is None:
                policy = getattr(self.ctx.info.graph.nodes[node], "retry", None)
                grant = self.record(
                    {
                        "node": node,
                        "activation": activation,
                        "attempt": attempt,
                        "policy": policy.model_dump(mode="json") if policy else None,
                    }
                )
                authorization = {
                    "kind": "retry-policy",
                    "id": f"{node}#{activation}.{attempt}",
                    "digest": grant,
                }
                rationale = "the node's retry policy allows another attempt"
            self.event(
                node,
                activation,
                Transition.RETRY_AUTHORIZED,
                NodeState.FAILED,
                NodeState.READY,
                authorization=authorization,
                actor=actor,
                rationale=rationale,
                request=f"{node}/{activation}/retry/{attempt}",
            )
        self.event(
            node,
            activation,
            Transition.WORK_STARTED,
            NodeState.READY,
            NodeState.ACTIVE,
            attempt=attempt,
            refs=refs,
        )

    def dispatch(self, node: str, site: dict[str, Any], **grant: Any) -> dict[str, Any]:
        """Journal an action's attempt as started, with its launch record, in *this* step.

        The step that schedules an action attempt commits its ``work-started``
        (naming the runner that will invoke it) before the attempt's own step
        invokes anything, so a runner that dies mid-turn leaves the attempt on
        record. Returns the site, marked started.
        """
        activation = int(site["activation"])
        attempt = int(site.get("attempt", 1))
        invocation = invocation_id(self.ctx.delivery_id, node, activation, attempt)
        launch = self.record(
            launch_record(self.ctx.delivery_id, node, activation, attempt, invocation)
        )
        refs = [{"kind": "launch", "id": f"{node}#{activation}.{attempt}", "digest": launch}]
        self.journal_start(node, site, refs=refs, **grant)
        return {**site, "started": True}

    def next_activation(self, node: str) -> tuple[int, int]:
        """(journal activation number, visit count) for a new activation of ``node``.

        The two differ after a restart from a savepoint: visits (bounded by
        max_visits) rewind with the state, activation numbers never do, because
        the journal keeps the invalidated ones.
        """
        activation = int(self.current("activations", node) or 0) + 1
        visit = int(self.current("visits", node) or 0) + 1
        self.put("activations", node, activation)
        self.put("visits", node, visit)
        return activation, visit

    def fail_delivery(self, code: ErrorCode | str, message: str) -> None:
        """The delivery fails closed with ``code``."""
        self.status("failed", outcome=str(code), message=message)
        self.ctx.stop_reason = self.ctx.stop_reason or "failed"
        self.ctx.stop.set()

    def stopped_by_operator(self, where: str) -> None:
        """Halt this node for an operator's stop, journaled with their name and reason."""
        request = self.ctx.stop_request
        who = request.get("actor") or "an operator"
        why = f": {request['reason']}" if request.get("reason") else ""
        self.halt(
            "stopped",
            f"stopped by {who} {where}{why}",
            ErrorCode.STOP_REQUESTED,
            actor={"id": who, "kind": "human"} if request.get("actor") else None,
        )

    def hand_back(self, where: str) -> None:
        """Halt this node for the next runner: this one is shutting down (decisions 0132, 0134).

        Nothing else is interrupted by it: siblings in flight finish, unless the
        runner's grace has run out, which has stopped them already.
        """
        self.halt(
            "stopped",
            f"handed back {where}: its runner is shutting down",
            ErrorCode.STOP_REQUESTED,
            interrupt=False,
        )
        self.ctx.handed_back = True

    def intervention(self, message: str, code: ErrorCode = ErrorCode.INTERVENTION_REQUIRED) -> None:
        """Halt this node and the delivery until an operator's directive (never a guess)."""
        self.halt("intervention", message, code)

    def halt(
        self,
        status: str,
        message: str,
        code: ErrorCode,
        *,
        actor: Mapping[str, str] | None = None,
        interrupt: bool = True,
    ) -> None:
        """Block this node's activation (journaled) and set the delivery's status.

        The node keeps its scheduled site, so ``recover continue`` re-runs the same
        attempt and ``recover intervene`` can complete or fail it. With
        ``interrupt`` (the default) the turns of other nodes in flight end too.
        """
        site = self.current("pending", self.node)
        if site is not None and self.node not in (self.updates.get("halted") or {}):
            activation = int(site["activation"])
            self.event(
                self.node,
                activation,
                Transition.WORK_BLOCKED,
                NodeState.ACTIVE,
                NodeState.BLOCKED,
                attempt=int(site.get("attempt", 1)),
                error={"code": code.value, "message": message[:4000]},
                actor=actor,
                rationale=f"{status}: waiting for an operator's directive",
                request=f"{self.node}/{activation}/halt/{site.get('attempt', 1)}/"
                f"{site.get('turn', 1)}/{site.get('halts', 0)}",
            )
            self.put("pending", self.node, {**site, "halts": int(site.get("halts", 0)) + 1})
            self.put(
                "halted", self.node, {"status": status, "code": code.value, "message": message}
            )
        self.status(status, outcome=code.value, message=message)
        if interrupt:
            self.ctx.stop_reason = self.ctx.stop_reason or status
            self.ctx.stop.set()
