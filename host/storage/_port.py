"""The storage port: what the Host core needs from a database, and nothing of any driver.

A backend (``host.storage.sqlite`` today) implements :class:`Storage` and the
:class:`StorageTx` its transactions hand out; all of its SQL stays in its own
package. The core never sees a connection, a cursor or a dialect: it asks for
a transaction, calls methods on it, and the transaction commits when the
``with`` block ends normally and rolls back when it raises.

Rules every backend keeps (``tests/storage`` checks them on each one):

* **One write transaction, all or nothing.** Everything written through one
  :class:`StorageTx` commits together or not at all, including the rows a
  checkpointer adds for LangGraph in the same transaction.
* **Fencing is data.** :meth:`StorageTx.fencing_token` reads the delivery's
  lease token inside the transaction in a way that conflicts with a concurrent
  grant (SQLite: the write lock taken at ``BEGIN``; PostgreSQL: ``FOR SHARE``).
  The core compares it with the token it holds and raises before writing.
* **Records are content-addressed.** :meth:`StorageTx.put_record` of a digest
  already stored changes nothing.
* **A goal advances by compare-and-set.** :meth:`StorageTx.advance_goal` moves
  a goal row only while its version is the one the caller read, and bumps it.
* **Retirement deletes once.** :meth:`StorageTx.retire` removes the delivery's
  checkpoints, checkpoint index and the records no other delivery references,
  and records the fact, in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, Protocol, TypedDict


class DeliveryRow(TypedDict):
    """One delivery as stored: its admitted document and the status its last checkpoint set."""

    delivery: str
    """The delivery id (also the substrate's thread id)."""
    graph: str
    """The graph's name."""
    graph_digest: str
    """Digest of the admitted graph."""
    digest: str
    """Digest of the admitted delivery document."""
    document: bytes
    """The canonical admitted delivery document."""
    status: str
    """The derived delivery status (one of ``DeliveryStatus``)."""
    outcome: str | None
    """The outcome or error code that goes with the status."""
    detail: dict[str, Any]
    """Suspensions, waits, message, savepoint and journal head (JSON)."""
    checkpoint: str | None
    """The id of the checkpoint that last set the status."""
    created: float
    """Admission time (epoch seconds)."""
    updated: float
    """Last change (epoch seconds)."""


class ListedDelivery(TypedDict):
    """One row of the delivery listing."""

    delivery: str
    """The delivery id."""
    graph: str
    """The graph's name."""
    status: str
    """The derived status."""
    outcome: str | None
    """The outcome, if any."""
    updated: float
    """Last change (epoch seconds)."""


class RunnerRow(TypedDict):
    """One runner process (``execsys serve``) as its heartbeat row shows it."""

    name: str
    """The runner's name (``--name``)."""
    host: str
    """The machine it runs on."""
    pid: int
    """Its process id there."""
    started: float
    """When it started (epoch seconds)."""
    heartbeat: float
    """Its last heartbeat (epoch seconds)."""
    deliveries: list[str]
    """The deliveries whose unexpired leases its process holds."""


class GoalRow(TypedDict):
    """One goal an application keeps on the Host's store (CodeClosure's), as stored.

    The Host gives ``document`` and ``state`` no meaning: the application owns both.
    """

    goal: str
    """The goal id."""
    version: int
    """Starts at 1; every :meth:`StorageTx.advance_goal` adds one."""
    document: bytes
    """The application's goal document (JSON), written once."""
    delivery: str | None
    """The delivery that carries the goal out, once there is one."""
    state: str
    """The application's state of the goal."""
    created: float
    """Creation time (epoch seconds)."""
    updated: float
    """Last change (epoch seconds)."""


class LeaseRow(NamedTuple):
    """A delivery's lease as stored."""

    holder: str
    """Who was granted it (``host:pid:tag``)."""
    token: int
    """The fencing token; every grant increments it."""
    expires: float
    """Epoch seconds; ``0`` once released."""


class StorageTx(Protocol):
    """One write transaction over the Host's tables (and the checkpoint, for its saver)."""

    # --- fencing and leases -----------------------------------------------------

    def fencing_token(self, delivery: str) -> int | None:
        """The delivery's current lease token, read so that a concurrent grant conflicts."""
        ...

    def lease(self, delivery: str) -> LeaseRow | None:
        """The delivery's lease row, if it was ever granted."""
        ...

    def put_lease(self, delivery: str, holder: str, token: int, expires: float) -> None:
        """Create or overwrite the delivery's lease row (a grant)."""
        ...

    def holder_has_leases(self, holder: str) -> bool:
        """Whether any lease row still names ``holder``."""
        ...

    def renew_lease(self, delivery: str, holder: str, token: int, expires: float) -> bool:
        """Move the expiry if ``holder`` still has ``token``; whether it did."""
        ...

    def release_lease(self, delivery: str, holder: str, token: int) -> None:
        """Mark the lease released (expiry 0) if ``holder`` still has ``token``."""
        ...

    # --- deliveries and status ----------------------------------------------------

    def insert_delivery(
        self, delivery: str, graph: str, graph_digest: str, digest: str, document: bytes
    ) -> None:
        """Record a newly admitted delivery (status ``running``); refuses a duplicate id."""
        ...

    def delivery(self, delivery: str) -> DeliveryRow | None:
        """The delivery's row as this transaction sees it."""
        ...

    def set_status(
        self,
        delivery: str,
        status: str,
        outcome: str | None,
        detail: dict[str, Any],
        checkpoint: str | None,
    ) -> None:
        """Update the derived status (``checkpoint`` None keeps the stored one)."""
        ...

    def claim_queued(self, delivery: str, message: str) -> bool:
        """Move a ``queued`` delivery to ``running`` with ``message``; False if it is not queued.

        Run in the claimer's fenced lease transaction: of several runners racing
        for one queued delivery, the lease lets one in at a time and the status
        condition lets only the first of them claim it.
        """
        ...

    # --- records ---------------------------------------------------------------------

    def put_record(self, digest: str, body: bytes) -> None:
        """Store a content-addressed value; a digest already stored is left as it is."""
        ...

    def put_record_ref(self, delivery: str, digest: str) -> None:
        """Remember that ``delivery`` references ``digest`` (idempotent)."""
        ...

    def put_records(self, delivery: str, records: list[tuple[str, bytes]]) -> None:
        """:meth:`put_record` and :meth:`put_record_ref` for each ``(digest, body)``, at once."""
        ...

    def has_record(self, digest: str) -> bool:
        """Whether the record is stored (this transaction's writes included)."""
        ...

    # --- goals -----------------------------------------------------------------------------

    def insert_goal(self, goal: str, document: bytes, state: str) -> None:
        """Store a new goal at version 1 with no delivery; refuses a duplicate id."""
        ...

    def advance_goal(self, goal: str, expected: int, state: str, delivery: str | None) -> bool:
        """Set ``state`` (and ``delivery``, unless None) if the version is ``expected``.

        The version goes up by one; False (and nothing written) when it is not ``expected``.
        """
        ...

    def add_goal_note(self, goal: str, text: str) -> None:
        """Append a note to the goal's log (why something failed outside its delivery)."""
        ...

    # --- journal and checkpoint index ------------------------------------------------

    def journal_lines(self, delivery: str) -> list[bytes]:
        """The delivery's journal lines, header first, as this transaction sees them."""
        ...

    def journal_head(self, delivery: str) -> tuple[str | None, int]:
        """(digest, ordinal) of the last stored journal line; (None, 0) if none."""
        ...

    def append_journal(self, delivery: str, rows: Iterable[tuple[int, str, bytes]]) -> None:
        """Append (ordinal, digest, line) rows; an ordinal already taken is refused."""
        ...

    def index_checkpoint(
        self, delivery: str, checkpoint: str, savepoint: str | None, events: int
    ) -> None:
        """Record which savepoint and journal length a checkpoint embodies."""
        ...

    # --- stop requests and retirement ---------------------------------------------------

    def request_stop(self, delivery: str, requested: float, actor: str) -> None:
        """Record (or replace) an operator's stop request; ``actor`` is opaque text."""
        ...

    def clear_stop(self, delivery: str) -> None:
        """Forget the delivery's stop request, if any."""
        ...

    def retirement(self, delivery: str) -> tuple[str, dict[str, Any]] | None:
        """(authorization, fact) of the delivery's retirement, if it was retired."""
        ...

    def retire(self, delivery: str, authorization: str, fact: dict[str, Any], outcome: str) -> None:
        """Delete the delivery's checkpoints and unshared records, record ``fact``, mark retired."""
        ...


class ArchivedSavepoint(NamedTuple):
    """A savepoint as the custody archive keeps it."""

    savepoint: str
    """Its id."""
    record: bytes
    """The delivery's custody record."""
    manifest: bytes
    """The manifest (its digest is the savepoint id)."""
    files: int
    """Number of entries."""
    bytes: int
    """Total content size."""
    created: float
    """Unix time it was first recorded."""


class CustodyArchive(Protocol):
    """Custody's savepoints and contents kept in a shared store (a fleet without a shared disk).

    Writes take the caller's fenced transaction, so a stale runner's writes are
    refused with the rest of its writes. See ``host/_archive.py``.
    """

    def head(self, delivery: str) -> str | None:
        """The savepoint the delivery's custody last moved to, as the archive knows it."""
        ...

    def savepoint(self, delivery: str, savepoint: str) -> ArchivedSavepoint | None:
        """One archived savepoint of the delivery."""
        ...

    def savepoints(self, delivery: str) -> list[ArchivedSavepoint]:
        """Every archived savepoint of the delivery, oldest first."""
        ...

    def blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        """The archived contents among ``digests``."""
        ...

    def put(
        self,
        tx: StorageTx,
        delivery: str,
        savepoint: str,
        entry: ArchivedSavepoint,
        refs: Sequence[str],
        blobs: Mapping[str, bytes],
    ) -> list[str]:
        """Archive a savepoint and make it the head; return the ``refs`` still without content.

        A non-empty answer means nothing may be committed yet: the caller sends
        those contents and tries again.
        """
        ...

    def put_contents(self, tx: StorageTx, delivery: str, blobs: Mapping[str, bytes]) -> None:
        """Store contents ahead of the savepoint that names them, as named by ``delivery``.

        A savepoint's new contents go in batches of bounded size, one transaction
        each, before :meth:`put` records the savepoint: no transaction and no
        process ever holds a large savepoint whole. Contents stored for a
        savepoint that never follows are the delivery's until :meth:`drop`.
        """
        ...

    def set_head(self, tx: StorageTx, delivery: str, savepoint: str) -> None:
        """Move the archived head to a savepoint already archived."""
        ...

    def drop(self, tx: StorageTx, delivery: str) -> None:
        """Forget the delivery's savepoints and every content no other delivery names."""
        ...

    def prune(self, tx: StorageTx, delivery: str, keep: Sequence[str], names: Sequence[str]) -> int:
        """Forget the delivery's savepoints but ``keep`` and its head; return how many went.

        ``names`` are the contents the kept savepoints name: the delivery's
        references to any other content go, and so does every content no
        delivery names any more.
        """
        ...


class Storage(Protocol):
    """A backend of the Host's tables; one instance per Host process (thread-safe)."""

    errors: tuple[type[BaseException], ...]
    """The driver's exception types: the Host maps them to ``STORE_ERROR``."""

    @property
    def archive(self) -> CustodyArchive | None:
        """Where custody's savepoints are also kept for other machines (None: one machine)."""
        ...

    def setup(self) -> None:
        """Create the Host's tables if missing."""
        ...

    def transaction(self, *, flush: bool = True) -> AbstractContextManager[StorageTx]:
        """One durable write transaction; rolled back if the body raises.

        ``flush=False`` lets its commit skip the durability flush (see
        :func:`host._step_rows.needs_flush` for the only writes that may).
        """
        ...

    def fenced_transaction(
        self, delivery: str, token: int, *, flush: bool = True
    ) -> AbstractContextManager[StorageTx]:
        """A write transaction that applies only while ``token`` is the delivery's lease token.

        A stale token raises ``LEASE_FENCED`` and applies nothing; the refusal may
        come when the body ends rather than at its start. The backend may send the
        body's writes as one statement (PostgreSQL, decision 0146): the body then
        sees its own writes only through reads, which turn it into an ordinary
        transaction. ``flush`` as for :meth:`transaction`.
        """
        ...

    def lease_transaction(self) -> AbstractContextManager[StorageTx]:
        """A write transaction of lease rows alone; may skip the durability flush.

        A grant lost to a power cut was never used: the first fenced write under its
        token flushes everything committed before it.
        """
        ...

    def delivery(self, delivery: str) -> DeliveryRow | None:
        """The delivery's row, or None."""
        ...

    def deliveries(self) -> list[ListedDelivery]:
        """Every delivery, latest change first."""
        ...

    def queued(self, limit: int) -> list[str]:
        """Up to ``limit`` ``queued`` deliveries, longest waiting first (candidates to claim)."""
        ...

    def beat_runner(self, name: str, host: str, pid: int, started: float) -> None:
        """Record a runner's heartbeat now (its row is created on the first beat)."""
        ...

    def drop_runner(self, name: str) -> None:
        """Remove a runner's row (it stopped cleanly)."""
        ...

    def runners(self) -> list[RunnerRow]:
        """Every runner row, by name, with the deliveries its process holds leases on."""
        ...

    def page_deliveries(
        self,
        *,
        limit: int,
        offset: int = 0,
        status: str | None = None,
        graph: str | None = None,
        changed_since: float | None = None,
    ) -> tuple[list[ListedDelivery], int]:
        """One page of deliveries (latest change first, then id) and how many match."""
        ...

    def goal(self, goal: str) -> GoalRow | None:
        """The goal's row, or None."""
        ...

    def goals(self) -> list[GoalRow]:
        """Every goal, newest first."""
        ...

    def goal_notes(self, goal: str) -> list[str]:
        """The goal's notes, oldest first."""
        ...

    def get_record(self, digest: str) -> Any:
        """A content-addressed value, decoded from JSON (``STORE_ERROR`` if missing)."""
        ...

    def journal_lines(self, delivery: str) -> list[bytes]:
        """The delivery's journal, header first, in ordinal order."""
        ...

    def journal_head(self, delivery: str) -> tuple[str | None, int]:
        """(head digest, event count) of the stored journal."""
        ...

    def savepoint_checkpoints(self, delivery: str) -> list[dict[str, Any]]:
        """Each savepoint the delivery's checkpoints embodied, with its latest checkpoint.

        Items: ``{"savepoint", "first", "created", "checkpoint", "events"}``, in
        checkpoint order of first appearance.
        """
        ...

    def checkpoint_events(self, delivery: str, checkpoint: str) -> int:
        """The journal length the checkpoint was committed with (0 if unknown)."""
        ...

    def latest_checkpoint(self, delivery: str) -> str | None:
        """The id of the delivery thread's latest root checkpoint, if any."""
        ...

    def stop_request(self, delivery: str) -> str | None:
        """The opaque actor text of a pending stop request, if any."""
        ...

    def retirement_fact(self, delivery: str) -> dict[str, Any] | None:
        """The delivery's retirement fact, if it was retired."""
        ...

    def lease(self, delivery: str) -> LeaseRow | None:
        """The delivery's lease row (a read outside any transaction)."""
        ...

    def grant_first_lease(self, delivery: str, holder: str, expires: float) -> bool:
        """Grant token 1 to ``holder`` if the delivery is not stored and was never leased.

        One atomic write (a single statement where the backend allows): False
        when the delivery row or a lease row exists, and then nothing is
        written. A new delivery's admission takes its lease this way.
        """
        ...

    def close(self) -> None:
        """Close the backend's connections."""
        ...
