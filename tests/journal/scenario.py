"""Deterministic journal builders shared by the tests and the fixture generator."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from contracts import AuthorityPolicy, Digest, NodeId
from contracts._journal import (
    ActivationRef,
    Actor,
    ActorKind,
    Approval,
    ApprovalRequirement,
    ArtifactDecl,
    AttemptRef,
    JournalEvent,
    JournalHeader,
    NodeDecl,
    NodeState,
    RecordRef,
    SuccessorInfo,
    TaskKind,
    Transition,
    format_time,
)
from host.journal import (
    AppendCommand,
    BindSuccessorCommand,
    InvalidateCommand,
    Journal,
    authority_digest,
)

EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
RUNNER = Actor(id="runner-1", kind=ActorKind.AUTOMATION)
ALICE = Actor(id="alice", kind=ActorKind.HUMAN, role="reviewer")
POLICY = AuthorityPolicy(
    actors={"alice": ("maintainer", "reviewer"), "bob": ("maintainer",), "carol": ("reviewer",)},
    approver="alice",
)


def ref(kind: str, ident: str, seed: str = "") -> RecordRef:
    """A record reference whose digest is derived from its name (stable across runs)."""
    import hashlib

    text = f"{kind}/{ident}/{seed}".encode()
    return RecordRef(
        kind=kind, id=ident, digest=Digest("sha256:" + hashlib.sha256(text).hexdigest())
    )


NODES = (
    NodeDecl(
        id=NodeId("plan"),
        upstream=(NodeId("review"),),
        artifacts=(ArtifactDecl(kind="port", id="plan"),),
    ),
    NodeDecl(
        id=NodeId("build"),
        upstream=(NodeId("plan"),),
        artifacts=(ArtifactDecl(kind="port", id="out"),),
    ),
    NodeDecl(id=NodeId("lint"), upstream=(NodeId("plan"),)),
    NodeDecl(
        id=NodeId("review"),
        task=TaskKind.HUMAN,
        upstream=(NodeId("build"), NodeId("lint")),
        roles=("reviewer",),
        approval=ApprovalRequirement(roles=("maintainer",), min_count=2),
    ),
    NodeDecl(
        id=NodeId("ship"), task=TaskKind.HYBRID, upstream=(NodeId("review"),), roles=("maintainer",)
    ),
)
"""plan -> {build, lint} -> review (human, 2 maintainer approvals) -> ship (hybrid).

review may loop back to plan (a new activation of each node per round).
"""


def header(execution: str = "d-journal-test", policy: AuthorityPolicy = POLICY) -> JournalHeader:
    return JournalHeader(
        execution=execution,
        authority=authority_digest(policy),
        graph=ref("graph", "triage").digest,
        start=NodeId("plan"),
        nodes=NODES,
        created_by=Actor(id="alice", kind=ActorKind.HUMAN),
        time=format_time(EPOCH),
    )


def always(_: RecordRef) -> bool:
    return True


class Driver:
    """Drives a journal through the public commands, tracking head and request ids."""

    def __init__(self, journal: Journal | None = None, execution: str = "d-journal-test") -> None:
        self.journal = journal if journal is not None else Journal.create(header(execution), POLICY)
        self.n = len(self.journal)

    def _next(self) -> tuple[str, datetime]:
        self.n += 1
        return f"req-{self.n:06d}", EPOCH + timedelta(seconds=self.n)

    def command(
        self, node: str, transition: Transition, prior: NodeState, **kw: Any
    ) -> AppendCommand:
        request, at = self._next()
        fields: dict[str, Any] = {
            "request": request,
            "expected_head": self.journal.head,
            "node": node,
            "expected_state": prior,
            "transition": transition,
            "actor": RUNNER,
            "at": at,
        }
        fields.update(kw)
        return AppendCommand(**fields)

    def do(self, node: str, transition: Transition, prior: NodeState, **kw: Any) -> JournalEvent:
        return self.journal.append(self.command(node, transition, prior, **kw))

    def ready(self, node: str, activation: int, *preds: tuple[str, int]) -> JournalEvent:
        return self.do(
            node,
            Transition.DEPENDENCIES_SATISFIED,
            NodeState.PENDING,
            activation=activation,
            predecessors=tuple(ActivationRef(node=NodeId(n), activation=a) for n, a in preds),
        )

    def start(self, node: str, activation: int = 1, seq: int = 1, **kw: Any) -> JournalEvent:
        kw.setdefault("attempt", AttemptRef(id=f"{node}-{activation}-{seq}", sequence=seq))
        return self.do(node, Transition.WORK_STARTED, NodeState.READY, activation=activation, **kw)

    def complete(self, node: str, activation: int = 1, seq: int = 1, **kw: Any) -> JournalEvent:
        kw.setdefault("attempt", AttemptRef(id=f"{node}-{activation}-{seq}", sequence=seq))
        kw.setdefault("refs", default_refs(node, activation))
        return self.do(
            node, Transition.WORK_COMPLETED, NodeState.ACTIVE, activation=activation, **kw
        )

    def fail(self, node: str, activation: int = 1, seq: int = 1, **kw: Any) -> JournalEvent:
        kw.setdefault("attempt", AttemptRef(id=f"{node}-{activation}-{seq}", sequence=seq))
        return self.do(node, Transition.WORK_FAILED, NodeState.ACTIVE, activation=activation, **kw)

    def retry(self, node: str, activation: int = 1, **kw: Any) -> JournalEvent:
        kw.setdefault("authorization", ref("authorization", f"retry-{node}-{self.n}"))
        return self.do(
            node, Transition.RETRY_AUTHORIZED, NodeState.FAILED, activation=activation, **kw
        )

    def invalidate(self, *targets: tuple[str, int], **kw: Any) -> tuple[JournalEvent, ...]:
        request, at = self._next()
        fields: dict[str, Any] = {
            "request": request,
            "expected_head": self.journal.head,
            "actor": ALICE,
            "at": at,
            "targets": tuple(ActivationRef(node=NodeId(n), activation=a) for n, a in targets),
            "source": ref("finding", "f-1"),
            "policy": "invalidate-descendants",
        }
        fields.update(kw)
        resolver = fields.pop("resolver", always)
        return self.journal.invalidate(InvalidateCommand(**fields), resolver)

    def bind(self, *keys: tuple[str, int], **kw: Any) -> tuple[JournalEvent, ...]:
        request, at = self._next()
        fields: dict[str, Any] = {
            "request": request,
            "expected_head": self.journal.head,
            "actor": ALICE,
            "at": at,
            "activations": tuple(ActivationRef(node=NodeId(n), activation=a) for n, a in keys),
            "successor": SuccessorInfo(
                execution="d-successor", header=ref("header", "succ").digest
            ),
        }
        fields.update(kw)
        return self.journal.bind_successor(BindSuccessorCommand(**fields))


HUMAN_REVIEWER = Actor(id="carol", kind=ActorKind.HUMAN, role="reviewer")
APPROVALS = (
    Approval(actor="alice", kind=ActorKind.HUMAN, role="maintainer", record=ref("approval", "a1")),
    Approval(actor="bob", kind=ActorKind.HUMAN, role="maintainer", record=ref("approval", "a2")),
)
SHIPPER = Actor(id="bob", kind=ActorKind.HUMAN, role="maintainer")


def default_refs(node: str, activation: int) -> tuple[RecordRef, ...]:
    decl = {d.id: d for d in NODES}[NodeId(node)]
    refs = [ref(a.kind, a.id, f"{node}#{activation}") for a in decl.artifacts]
    if decl.task is not TaskKind.AUTOMATED:
        refs.append(ref("conduct", f"{node}-{activation}"))
    return tuple(refs)


def run_round(d: Driver, round_: int, preds_of_plan: tuple[tuple[str, int], ...] = ()) -> None:
    """One full round plan -> build, lint -> review (activation ``round_`` of each)."""
    if round_ > 1:
        d.ready("plan", round_, *preds_of_plan)
    d.start("plan", round_)
    d.complete("plan", round_)
    d.ready("build", round_, ("plan", round_))
    d.ready("lint", round_, ("plan", round_))
    d.start("build", round_)
    d.fail("build", round_, error=None)
    d.retry("build", round_)
    d.start("build", round_, seq=2)
    d.complete("build", round_, seq=2)
    d.start("lint", round_)
    d.complete("lint", round_)
    d.ready("review", round_, ("build", round_), ("lint", round_))
    d.start("review", round_, actor=HUMAN_REVIEWER)
    d.complete("review", round_, actor=HUMAN_REVIEWER, approvals=APPROVALS)


def happy_journal(execution: str = "d-journal-test") -> Journal:
    """Two rounds through the review loop, then ship."""
    d = Driver(execution=execution)
    run_round(d, 1)
    run_round(d, 2, (("review", 1),))
    d.ready("ship", 1, ("review", 2))
    d.start("ship", 1)
    d.complete("ship", 1, actor=SHIPPER)
    return d.journal
