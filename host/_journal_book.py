"""The Host's journals: one per delivery, appended inside checkpoint transactions.

Node handlers cannot chain events themselves (parallel branches of one
super-step do not see each other's writes), so they queue *drafts*; at commit
the saver hands this book a step's drafts, and the book turns each into an
append command against the current head, runs the journal's rules, and
writes the resulting lines with the same cursor as the checkpoint.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar

from contracts import AdmittedDelivery, Digest
from contracts._journal import (
    ActivationRef,
    Actor,
    ActorKind,
    JournalEvent,
    JournalHeader,
    NodeState,
    RecordRef,
    Transition,
)
from host._outbox import EventItem, InvalidateItem
from host.journal import (
    AppendCommand,
    InvalidateCommand,
    Journal,
    authority_digest,
    decode_line,
)
from host.journal._codec import encode_record_with_digest
from host.journal._header import node_decls
from host.storage import Storage, StorageTx


def journal_time() -> str:
    """Now, in the journal's one spelling of an instant."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def build_header(delivery: AdmittedDelivery, created_by: str) -> JournalHeader:
    """The journal header binding a delivery's id, policy and graph."""
    graph = delivery.graph
    return JournalHeader(
        execution=delivery.delivery_id,
        authority=authority_digest(delivery.authority),
        graph=delivery.graph_digest,
        start=graph.start,
        nodes=node_decls(graph),
        created_by=Actor(id=created_by, kind=ActorKind.AUTOMATION),
        time=journal_time(),
    )


class JournalBook:
    """In-memory journals of the deliveries this process writes, backed by the store.

    The journals of deliveries a run is driving stay cached; of the others, only
    the :attr:`IDLE` most recently used are kept (a long-lived runner would
    otherwise hold every journal it ever wrote). A dropped journal is rehydrated
    from the store, all rules replayed, the next time it is needed.

    The book's tables are guarded by a lock: on PostgreSQL the checkpointer
    commits in worker threads, several deliveries at once, while the event
    loop's thread starts and ends runs. One delivery's journal is appended by
    one commit at a time (LangGraph chains a thread's checkpoint writes).
    """

    #: How many journals of deliveries no run is driving stay cached.
    IDLE = 16

    def __init__(self, store: Storage) -> None:
        self.store = store
        self._journals: OrderedDict[str, Journal] = OrderedDict()
        self._deliveries: dict[str, AdmittedDelivery] = {}
        self._driving: set[str] = set()
        self._lock = threading.Lock()

    def register(self, delivery: AdmittedDelivery) -> None:
        """Make a delivery's policy known (needed to open or rehydrate its journal)."""
        with self._lock:
            self._deliveries[delivery.delivery_id] = delivery

    def drive(self, delivery: AdmittedDelivery) -> None:
        """A run starts driving ``delivery``: keep its journal cached until :meth:`release`."""
        with self._lock:
            self._deliveries[delivery.delivery_id] = delivery
            self._driving.add(delivery.delivery_id)

    def release(self, delivery_id: str) -> None:
        """The run driving ``delivery_id`` ended; its journal may now be dropped."""
        with self._lock:
            self._driving.discard(delivery_id)
            self._trim()

    def cached(self) -> list[str]:
        """Deliveries whose journal is cached, least recently used first."""
        with self._lock:
            return list(self._journals)

    def _keep(self, delivery_id: str, journal: Journal) -> None:
        with self._lock:
            self._journals[delivery_id] = journal
            self._journals.move_to_end(delivery_id)
            self._trim()

    def _trim(self) -> None:  # the caller holds the lock
        idle = [d for d in self._journals if d not in self._driving]
        for delivery_id in idle[: max(0, len(idle) - self.IDLE)]:
            del self._journals[delivery_id]
            self._deliveries.pop(delivery_id, None)

    def create(self, tx: StorageTx, delivery: AdmittedDelivery, created_by: str) -> None:
        """Write the header of a new delivery's journal."""
        self.register(delivery)
        header = build_header(delivery, created_by)
        journal = Journal.create(header, delivery.authority)
        digest, line = encode_record_with_digest(header)
        tx.append_journal(delivery.delivery_id, [(0, digest, line)])
        self._keep(delivery.delivery_id, journal)

    def journal(self, delivery_id: str, tx: StorageTx | None = None) -> Journal:
        """The delivery's journal, rehydrated from the store on first use."""
        with self._lock:
            journal = self._journals.get(delivery_id)
            if journal is not None:
                self._journals.move_to_end(delivery_id)
        if journal is None:
            if tx is not None:
                lines = tx.journal_lines(delivery_id)
            else:
                lines = self.store.journal_lines(delivery_id)
            records = [decode_line(line, i) for i, line in enumerate(lines)]
            header = records[0]
            events = [r for r in records[1:] if isinstance(r, JournalEvent)]
            assert isinstance(header, JournalHeader)
            assert len(events) == len(records) - 1
            with self._lock:
                authority = self._deliveries[delivery_id].authority
            journal = Journal.rehydrate(header, events, authority)
            self._keep(delivery_id, journal)
        return journal

    def forget(self, delivery_id: str) -> None:
        """Drop the cached journal (after a rolled-back transaction)."""
        with self._lock:
            self._journals.pop(delivery_id, None)

    def append(
        self, tx: StorageTx, delivery_id: str, drafts: Sequence[EventItem | InvalidateItem]
    ) -> Journal:
        """Chain a step's drafts onto the journal, write them in ``tx``; return the journal.

        Each line and digest is the one the journal computed while appending (no
        second encoding); every write goes through ``tx``, inside the caller's
        transaction.
        """
        journal = self.journal(delivery_id, tx)
        before = len(journal)
        try:
            now = datetime.now(UTC)
            for draft in drafts:
                if draft["type"] == "invalidate":
                    journal.invalidate(
                        _invalidation(draft, journal.head, now), _record_resolver(tx)
                    )
                    continue
                content = _routine_content(draft)
                if content is None:
                    journal.append(_command(draft, journal.head, now))
                else:
                    journal.append_content(draft["request"], journal.head, now, content)
            tx.append_journal(delivery_id, journal.lines_since(before))
        except BaseException:
            # The transaction rolls back: the in-memory journal must not stay ahead of it.
            self.forget(delivery_id)
            raise
        return journal


_E = TypeVar("_E", bound=StrEnum)


def _member_table(cls: type[_E]) -> dict[str, _E]:
    return {member.value: member for member in cls}


_KINDS = _member_table(ActorKind)
_STATES = _member_table(NodeState)
_TRANSITIONS = _member_table(Transition)


def _member(cls: type[_E], table: dict[str, _E], value: Any) -> _E:
    """``cls(value)`` by a dict look-up (the enum call is the slow part); same refusals."""
    try:
        return table[value]
    except (KeyError, TypeError):
        return cls(value)


#: Validated actors by (id, kind, role): a step's drafts name the same few actors.
_ACTORS: dict[tuple[Any, ActorKind, Any], Actor] = {}


def _actor(ident: Any, kind: ActorKind, role: Any) -> Actor:
    """The validated :class:`Actor`; built (and validated) once per distinct value."""
    key = (ident, kind, role)
    try:
        found = _ACTORS.get(key)
    except TypeError:  # unhashable: not a valid actor; validation says why
        return Actor(id=ident, kind=kind, role=role)
    if found is None:
        found = Actor(id=ident, kind=kind, role=role)
        if len(_ACTORS) < 256 and type(ident) is str and (role is None or type(role) is str):
            _ACTORS[key] = found
    return found


_ROUTINE = frozenset(
    {Transition.DEPENDENCIES_SATISFIED, Transition.WORK_STARTED, Transition.WORK_COMPLETED}
)


def _routine_content(draft: Mapping[str, Any]) -> dict[str, Any] | None:
    """The request content of one of the Host's routine transitions, built from its draft.

    Returns exactly what ``AppendCommand.request_content()`` returns for the
    command the validated path (:func:`_command`) would build from the same
    draft; the test suite pins the equality. Every value here is produced by
    the Host's own handlers from admitted ids (node ids, activation numbers,
    digests the Host computed), so schema validation cannot fail and is
    skipped; the journal's rules still check every event. Anything else
    (approvals, errors, authorizations, human actors) returns None and takes the
    validated path.
    """
    transition = draft["transition"]
    actor = draft.get("actor") or {}
    if (
        transition not in _ROUTINE
        or draft.get("approvals")
        or draft.get("error")
        or draft.get("authorization")
        or actor.get("kind") == "human"
    ):
        return None
    node = draft["node"]
    activation = int(draft["activation"])
    attempt = draft.get("attempt")
    return {
        "actor": {"id": actor.get("id", "host"), "kind": "automation", "role": None},
        "rationale": draft.get("rationale", ""),
        "node": node,
        "activation": activation,
        "expected_state": draft["prior"],
        "transition": transition,
        "attempt": (
            None
            if attempt is None
            else {"id": f"{node}#{activation}.{attempt}", "sequence": int(attempt)}
        ),
        "refs": [
            {"kind": r["kind"], "id": r["id"], "digest": r["digest"]}
            for r in draft.get("refs") or ()
        ],
        "authorization": None,
        "approvals": [],
        "error": None,
        "predecessors": [
            {"node": p[0], "activation": int(p[1])} for p in draft.get("predecessors") or ()
        ],
        "command": "AppendCommand",
    }


def _command(draft: Mapping[str, Any], head: str, now: datetime) -> AppendCommand:
    """The validated command for any draft (the general path)."""
    # One validation call for the whole command: nested values go in as plain
    # data, so pydantic checks them in the same pass (the draft is caller data
    # and is validated in full; only the per-model round trips are saved).
    attempt = draft.get("attempt")
    actor = draft.get("actor") or {}
    kind = _member(ActorKind, _KINDS, actor.get("kind", "automation"))
    error = draft.get("error")
    authorization = draft.get("authorization")
    return AppendCommand.model_validate(
        {
            "request": draft["request"],
            "expected_head": Digest(head),
            "actor": _actor(
                actor.get("id", "host"),
                kind,
                actor.get("role") if kind is ActorKind.HUMAN else None,
            ),
            "at": now,
            "rationale": draft.get("rationale", ""),
            "node": draft["node"],
            "activation": int(draft["activation"]),
            "expected_state": _member(NodeState, _STATES, draft["prior"]),
            "transition": _member(Transition, _TRANSITIONS, draft["transition"]),
            "attempt": (
                {"id": f"{draft['node']}#{draft['activation']}.{attempt}", "sequence": attempt}
                if attempt is not None
                else None
            ),
            "refs": tuple(draft.get("refs") or ()),
            "approvals": tuple(
                {
                    "actor": a["actor"],
                    "kind": ActorKind.HUMAN,
                    "role": a["role"],
                    "record": a["record"],
                }
                for a in draft.get("approvals") or ()
            ),
            "error": error or None,
            "authorization": authorization or None,
            "predecessors": tuple(
                {"node": p[0], "activation": int(p[1])} for p in draft.get("predecessors") or ()
            ),
        }
    )


def _record_resolver(tx: StorageTx) -> Callable[[RecordRef], bool]:
    """An invalidation's source must be a record the store holds (this transaction included)."""

    def resolve(ref: RecordRef) -> bool:
        return tx.has_record(ref.digest)

    return resolve


def _invalidation(draft: Mapping[str, Any], head: str, now: datetime) -> InvalidateCommand:
    actor = draft.get("actor") or {}
    return InvalidateCommand(
        request=draft["request"],
        expected_head=Digest(head),
        actor=Actor(id=actor.get("id", "operator"), kind=ActorKind(actor.get("kind", "human"))),
        at=now,
        rationale=draft.get("rationale", ""),
        targets=tuple(ActivationRef(node=n, activation=int(a)) for n, a in draft["targets"]),
        source=RecordRef(**draft["source"]),
        policy=draft["policy"],
    )
