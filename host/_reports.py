"""The Host's typed reports: frozen models whose ``to_json`` is the public JSON shape.

``execsys ... --json`` and ``/api/v1`` print exactly ``to_json()``; the key
order of each rendering is part of that shape (``tests/integration`` pins it).
Values the store kept as canonical JSON (a delivery's pending waits, a
retirement fact read back) are rendered in canonical (sorted) key order, as
they always were.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from contracts import DeliveryId, Digest, NodeId, NodeState, SavepointId
from contracts._status import DeliveryStatus, SuspensionView, WaitView


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _canonical(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` with its keys sorted at every level (the order the store keeps)."""
    return {k: _canonical(v) if isinstance(v, dict) else v for k, v in sorted(value.items())}


class JournalHead(_Frozen):
    """A journal's head digest and length."""

    head: Digest | None
    """The digest of the last event (the header's when there is none)."""
    events: int
    """How many events the journal holds."""

    def to_json(self) -> dict[str, Any]:
        """``{"head", "events"}``."""
        return {"head": self.head, "events": self.events}


class RetirementFact(_Frozen):
    """The durable fact a retirement keeps once a delivery's records are deleted."""

    delivery: DeliveryId
    """The retired delivery."""
    thread: str
    """Its durable thread (the delivery id)."""
    digest: Digest
    """The admitted delivery's digest."""
    graph: Digest
    """The control graph's digest."""
    status: DeliveryStatus
    """The status it was retired from."""
    authorization: str
    """The authorization it was retired under."""
    actor: str
    """Who retired it."""
    journal: JournalHead
    """The journal's head when it was retired."""
    retired_at: float
    """When (epoch seconds)."""
    fact: Digest
    """The digest of this fact (without ``retired_at``)."""
    performed: bool = False
    """Whether this call deleted the records (False: retired before, same authorization)."""

    def fact_json(self) -> dict[str, Any]:
        """The stored fact alone, in canonical key order (``inspect``'s ``retirement``)."""
        fact = self.to_json()
        del fact["performed"]
        return _canonical(fact)

    def to_json(self) -> dict[str, Any]:
        """What ``execsys retire --json`` prints: the fact and ``performed``."""
        return {
            "delivery": self.delivery,
            "thread": self.thread,
            "digest": self.digest,
            "graph": self.graph,
            "status": self.status.value,
            "authorization": self.authorization,
            "actor": self.actor,
            "journal": self.journal.to_json(),
            "retired_at": self.retired_at,
            "fact": self.fact,
            "performed": self.performed,
        }


class NeededDirective(_Frozen):
    """A delivery only an operator's directive can move, and why."""

    delivery: DeliveryId
    """The delivery."""
    status: DeliveryStatus
    """Its stored status."""
    reasons: tuple[str, ...]
    """Why it needs a directive, one sentence each."""

    def to_json(self) -> dict[str, Any]:
        """``{"delivery", "status", "reasons"}`` (``status --json``'s ``needs_directive``)."""
        return {
            "delivery": self.delivery,
            "status": self.status.value,
            "reasons": list(self.reasons),
        }


class DeliverySummary(_Frozen):
    """One row of the delivery listing."""

    delivery: DeliveryId
    """The delivery."""
    graph: str
    """The graph's name."""
    status: DeliveryStatus
    """Its current status."""
    outcome: str | None
    """Its outcome or failure code, if any."""
    updated: str
    """ISO-8601 time of its last change."""
    changed: float
    """Its last change as epoch seconds."""

    def to_json(self, *, changed: bool = False) -> dict[str, Any]:
        """A ``status --json`` row; with ``changed``, a page row (adds the epoch seconds)."""
        row: dict[str, Any] = {
            "delivery": self.delivery,
            "graph": self.graph,
            "status": self.status.value,
            "outcome": self.outcome,
            "updated": self.updated,
        }
        if changed:
            row["changed"] = self.changed
        return row


class DeliveryPage(_Frozen):
    """One page of the listing, latest change first, and how many rows match in all."""

    deliveries: tuple[DeliverySummary, ...]
    """The page's rows."""
    total: int
    """How many deliveries match the filter."""

    def to_json(self) -> dict[str, Any]:
        """``{"deliveries": [row + "changed"], "total"}``."""
        return {
            "deliveries": [row.to_json(changed=True) for row in self.deliveries],
            "total": self.total,
        }


class RunnerView(_Frozen):
    """A live runner process (``execsys serve``) and the deliveries it holds."""

    name: str
    """The runner's name."""
    host: str
    """The machine it runs on."""
    pid: int
    """Its process id there."""
    started: str
    """ISO-8601 time it started."""
    heartbeat: str
    """ISO-8601 time of its last heartbeat."""
    deliveries: tuple[DeliveryId, ...]
    """The deliveries whose unexpired leases it holds."""
    age_s: float
    """Seconds since its last heartbeat."""

    def to_json(self) -> dict[str, Any]:
        """A row of ``execsys runners --json``."""
        return {
            "name": self.name,
            "host": self.host,
            "pid": self.pid,
            "started": self.started,
            "heartbeat": self.heartbeat,
            "deliveries": list(self.deliveries),
            "age_s": self.age_s,
        }


class NodeView(_Frozen):
    """A node's state as the journal's projection shows it."""

    state: NodeState
    """The state of its latest activation."""
    attempts: int
    """Attempts over all its activations."""
    activations: int
    """How many times it was activated."""

    def to_json(self) -> dict[str, Any]:
        """``{"state", "attempts", "activations"}``."""
        return {
            "state": self.state.value,
            "attempts": self.attempts,
            "activations": self.activations,
        }


class PendingWait(_Frozen):
    """A pending workflow wait and the approvals it has."""

    node: NodeId
    """The wait node."""
    kind: str
    """approval | decision | workflow-result."""
    approvals: int
    """Approvals recorded so far."""
    needed: int
    """Approvals needed."""
    roles: tuple[str, ...]
    """Roles that may resolve it."""

    def to_json(self) -> dict[str, Any]:
        """The stored wait, in canonical key order."""
        return {
            "approvals": self.approvals,
            "kind": self.kind,
            "needed": self.needed,
            "node": self.node,
            "roles": list(self.roles),
        }


class CustodyHeads(_Frozen):
    """The savepoint the checkpoint expects and custody's own head, read independently."""

    savepoint: SavepointId | None
    """The savepoint the latest checkpoint recorded."""
    head: SavepointId | None = None
    """Custody's head savepoint (None without a workspace)."""

    def to_json(self) -> dict[str, Any]:
        """``{"savepoint", "head"}``."""
        return {"savepoint": self.savepoint, "head": self.head}


class LeaseView(_Frozen):
    """The delivery's writer lease as other processes see it."""

    state: Literal["held", "expired", "gone", "released", "free"]
    """Whether a live holder has it."""
    holder: str | None
    """The holder (``host:pid:nonce``), if it was ever granted."""
    token: int
    """The fencing token (0 if never granted)."""
    expires: float | None
    """When it expires (epoch seconds); None when released or free."""

    def to_json(self) -> dict[str, Any]:
        """``{"state", "holder", "token", "expires"}``."""
        return {
            "state": self.state,
            "holder": self.holder,
            "token": self.token,
            "expires": self.expires,
        }


class SavepointView(_Frozen):
    """A savepoint the delivery's checkpoints embodied (a restart target)."""

    savepoint: SavepointId
    """The savepoint."""
    first: str
    """The first checkpoint that embodied it."""
    created: float
    """When that checkpoint was written (epoch seconds)."""
    checkpoint: str
    """The latest checkpoint that embodied it."""
    events: int
    """The journal length that checkpoint committed with."""

    def to_json(self) -> dict[str, Any]:
        """``{"savepoint", "first", "created", "checkpoint", "events"}``."""
        return {
            "savepoint": self.savepoint,
            "first": self.first,
            "created": self.created,
            "checkpoint": self.checkpoint,
            "events": self.events,
        }


class ActiveAttempt(_Frozen):
    """An attempt the journal shows active (started, its result not committed)."""

    node: NodeId
    """The node."""
    activation: int
    """Its activation number."""
    attempt: int
    """The attempt number."""
    reason: str = ""
    """Why it counts as interrupted (set only when it was)."""

    def to_json(self) -> dict[str, Any]:
        """``{"node", "activation", "attempt", "reason"}``."""
        return {
            "node": self.node,
            "activation": self.activation,
            "attempt": self.attempt,
            "reason": self.reason,
        }


_FREE = LeaseView(state="free", holder=None, token=0, expires=None)


class InspectReport(_Frozen):
    """What ``execsys inspect`` shows: status, node states, heads, and the directives possible.

    A retired delivery keeps only its status, graph and :attr:`retirement`;
    everything else is then empty and not rendered.
    """

    delivery: DeliveryId
    """The delivery."""
    status: DeliveryStatus
    """Its current status."""
    outcome: str | None = None
    """Its terminal outcome or failure code."""
    suspension: SuspensionView | None = None
    """The first pending action-input question."""
    wait: WaitView | None = None
    """The first pending workflow wait."""
    message: str = ""
    """One line saying what happened last."""
    graph: str
    """The graph's name."""
    updated: str = ""
    """ISO-8601 time of the last change."""
    suspensions: tuple[SuspensionView, ...] = ()
    """Every pending action-input question."""
    waits: tuple[PendingWait, ...] = ()
    """Every pending workflow wait."""
    nodes: dict[NodeId, NodeView] = {}
    """Every node of the graph, in id order."""
    journal: JournalHead = JournalHead(head=None, events=0)
    """The journal's head."""
    custody: CustodyHeads = CustodyHeads(savepoint=None)
    """The savepoint the checkpoint expects, and custody's head."""
    checkpoint: str | None = None
    """The latest checkpoint's id."""
    directives: tuple[str, ...] = ()
    """The commands that apply now (``recover continue``, ``retire``, ...)."""
    interrupted: tuple[ActiveAttempt, ...] = ()
    """Attempts a runner that is gone left active."""
    lease: LeaseView = _FREE
    """The writer lease."""
    needs_directive: str | None = None
    """Why only a directive can move it (rendered only when set)."""
    savepoints: tuple[SavepointView, ...] = ()
    """The savepoints a restart can go back to."""
    mismatches: tuple[str, ...] = ()
    """Disagreements between checkpoint, journal and custody."""
    retirement: RetirementFact | None = None
    """The retirement fact, once retired."""

    def to_json(self) -> dict[str, Any]:
        """What ``execsys inspect --json`` prints and ``/api/v1/.../inspect`` answers."""
        head: dict[str, Any] = {
            "delivery": self.delivery,
            "status": self.status.value,
            "outcome": self.outcome,
            "suspension": self.suspension.model_dump(mode="json") if self.suspension else None,
            "wait": self.wait.model_dump(mode="json") if self.wait else None,
            "message": self.message,
            "graph": self.graph,
        }
        if self.status is DeliveryStatus.RETIRED:
            fact = self.retirement
            return {
                **head,
                "retirement": fact.fact_json() if fact is not None else None,
                "directives": list(self.directives),
            }
        report = {
            **head,
            "updated": self.updated,
            "suspensions": [s.model_dump(mode="json") for s in self.suspensions],
            "waits": [w.to_json() for w in self.waits],
            "nodes": {node: view.to_json() for node, view in self.nodes.items()},
            "journal": self.journal.to_json(),
            "custody": self.custody.to_json(),
            "checkpoint": self.checkpoint,
            "directives": list(self.directives),
            "interrupted": [a.to_json() for a in self.interrupted],
            "lease": self.lease.to_json(),
        }
        if self.needs_directive is not None:
            report["needs_directive"] = self.needs_directive
        report["savepoints"] = [s.to_json() for s in self.savepoints]
        report["mismatches"] = list(self.mismatches)
        return report
