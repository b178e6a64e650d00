"""The Host core's state and its drive loop, on the storage and substrate ports.

``HostCore`` owns what every operation of the Host shares: the storage, the
lease manager, the journal book, custody (fenced), the record cache, the
per-delivery locks, the deliveries this process drives now, and the
substrate (created on first use: importing LangGraph costs most of a second,
and reading commands never need it). :meth:`HostCore.drive` is the one place
a delivery's thread runs: it registers the run so a stop or a lost lease
reaches it, and it turns every failure into one catalogued error.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from contracts import (
    ActionNode,
    AdmittedDelivery,
    Custody,
    ErrorCode,
    TransferableCustody,
    error,
)
from contracts._invocation import Invoker
from contracts._status import NEEDS_DIRECTIVE, NOT_RUNNABLE, DeliveryStatus, StatusReport
from host._archive import ArchivedCustody
from host._context import DeliveryContext, StepWriter
from host._goals import GoalTable
from host._journal_book import JournalBook
from host._lease import FencedCustody, LeaseManager, holder_name
from host._operations import Operation
from host._stop_requests import clear_stop, stop_request
from host._substrate import Substrate, ThreadSnapshot
from host._views import ReplayCache, status_report
from host.storage import Storage, fenced

STOP_POLL_S = 0.2
"""How often a delivery being driven looks for a stop request made by another process."""


def first_input(delivery: AdmittedDelivery, head: str, ctx: DeliveryContext) -> dict[str, Any]:
    """The input that starts a delivery's thread: its start node, scheduled once.

    An action start node is journaled as started with the input checkpoint,
    before its first turn runs (like every other dispatched attempt).
    """
    start = delivery.graph.start
    site: dict[str, Any] = {"activation": 1, "visit": 1, "attempt": 1, "turn": 1}
    site["predecessors"] = []
    writer = StepWriter(ctx, {}, start)
    if isinstance(delivery.graph.nodes[start], ActionNode):
        site = writer.dispatch(start, site)
    first: dict[str, Any] = {
        "run": {"status": DeliveryStatus.RUNNING.value, "outcome": "", "message": "started"},
        "visits": {start: 1},
        "activations": {start: 1},
        "pending": {start: site},
        "wake": {start: {}},
        "savepoint": {"head": head},
    }
    if writer.outbox:
        first["outbox"] = writer.outbox
    return first


SubstrateFactory = Callable[[Storage, JournalBook], Substrate]
"""Builds the substrate for a Host's storage and journal book (called on first use)."""


class HostCore:
    """What every Host operation shares, and the loop that drives a delivery's thread."""

    def __init__(
        self,
        *,
        store: Storage,
        substrate: SubstrateFactory,
        data_dir: Path,
        custody: Custody,
        invoker: Invoker,
        operations: Mapping[str, Operation],
        lease_ttl_s: float = 30.0,
    ) -> None:
        self.store = store
        self.data_dir = data_dir
        self.custody = custody
        self.invoker = invoker
        self.operations = dict(operations)
        self.journals = JournalBook(self.store)
        self.holder = holder_name(uuid.uuid4().hex[:12])
        self.leases = LeaseManager(
            self.store, data_dir / "locks", self.holder, lease_ttl_s, on_lost=self._lease_lost
        )
        self.archived: ArchivedCustody | None = None
        """Custody kept in the store too (a store without a shared disk); see ``_archive``."""
        archive = store.archive
        if archive is not None and isinstance(custody, TransferableCustody):
            self.archived = ArchivedCustody(custody, archive, self.leases.transaction)
            self.custody = self.archived
        self._make_substrate = substrate
        self._substrate: Substrate | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self.active: dict[str, DeliveryContext] = {}
        """Deliveries this process is driving now, by id (a stop reaches them directly)."""
        self.draining = False
        """Set by :meth:`drain`: every drive hands its delivery back at the next boundary."""
        self.interrupting = False
        """Set by ``drain(interrupt=True)``: turns in flight end too (decision 0134)."""
        self.stopping = ""
        """Set by :meth:`stop_all` (its reason): every drive here stops as an operator's would."""
        self.handed_back: set[str] = set()
        """Deliveries whose last drive here ended handed back (see :meth:`drain`)."""
        self._runs: dict[str, asyncio.Future[Any]] = {}
        """The thread run driving each active delivery (a lost lease cancels it)."""
        self._records: OrderedDict[str, Any] = OrderedDict()
        self._admitted = AdmittedCache()
        """Deliveries parsed from their stored documents (see :meth:`delivery`)."""
        self.replays = ReplayCache()
        """Journals replayed for ``inspect``, kept between calls (the console inspects often)."""

    # --- the substrate (lazy) ------------------------------------------------------------

    @property
    def substrate(self) -> Substrate:
        """The substrate, created on first use."""
        if self._substrate is None:
            self._substrate = self._make_substrate(self.store, self.journals)
            # A substrate that fences its own writes counts its refusals with ours.
            share = getattr(self._substrate, "share_lease_counts", None)
            if share is not None:
                share(self.leases.counts)
        return self._substrate

    @property
    def compiles(self) -> int:
        """Graphs compiled so far by this Host."""
        return 0 if self._substrate is None else self._substrate.compiles

    # --- shared look-ups -------------------------------------------------------------------

    def lock(self, delivery: str) -> asyncio.Lock:
        """The in-process lock of one delivery (one operation at a time per Host)."""
        return self._locks.setdefault(delivery, asyncio.Lock())

    def cache_record(self, digest: str, value: Any) -> None:
        """Remember a record this process wrote or read (bounded)."""
        self._records[digest] = value
        self._records.move_to_end(digest)
        while len(self._records) > 10_000:
            self._records.popitem(last=False)

    def load_record(self, digest: str) -> Any:
        """A record, from the cache or the store."""
        if digest in self._records:
            return self._records[digest]
        value = self.store.get_record(digest)
        self.cache_record(digest, value)
        return value

    def status(self, delivery_id: str) -> StatusReport:
        """The delivery's current status (from the store; no substrate)."""
        return status_report(self.store, delivery_id)

    @property
    def goals(self) -> GoalTable:
        """The goal rows applications keep on this Host's store."""
        return GoalTable(self.store)

    def lease_counts(self) -> dict[str, int]:
        """Lease grants, renewals, lost renewals and fenced writes of this Host so far."""
        return dict(self.leases.counts)

    def runnable(self, delivery_id: str) -> None:
        """Refuse work on a delivery that is stopped, in intervention, or ended."""
        status = self.status(delivery_id).status
        if status is DeliveryStatus.QUEUED:
            raise error(
                ErrorCode.DELIVERY_NOT_RUNNABLE,
                "the delivery is queued for a runner",
                path=delivery_id,
                expected="a runner to take it ('execsys serve'), or 'execsys stop'",
            )
        if status in NOT_RUNNABLE:
            raise error(
                ErrorCode.DELIVERY_NOT_RUNNABLE,
                f"the delivery is {status}",
                path=delivery_id,
                expected="'execsys recover' first"
                if status in NEEDS_DIRECTIVE
                else "a delivery that has not ended",
            )

    def delivery(self, delivery_id: str) -> AdmittedDelivery:
        """The stored admitted delivery; refused when unknown, retired or altered."""
        row = self.store.delivery(delivery_id)
        if row is None:
            raise error(
                ErrorCode.DELIVERY_NOT_FOUND,
                "no such delivery",
                path=delivery_id,
                expected="a delivery id listed by 'execsys status'",
            )
        if row["status"] == DeliveryStatus.RETIRED:
            raise error(ErrorCode.DELIVERY_RETIRED, "the delivery is retired", path=delivery_id)
        delivery = self._admitted.parsed(delivery_id, row["document"])
        if delivery.digest != row["digest"]:
            raise error(
                ErrorCode.STORE_ERROR,
                "stored delivery does not match its digest",
                path=delivery_id,
                expected=row["digest"],
            )
        return delivery

    def context(self, delivery: AdmittedDelivery) -> DeliveryContext:
        """A fresh handler context for one run of ``delivery``."""
        return DeliveryContext(
            delivery=delivery,
            info=self.substrate.info(delivery.graph),
            custody=FencedCustody(self.custody, self.leases),
            invoker=self.invoker,
            operations=self.operations,
            load_record=self.load_record,
            cache_record=self.cache_record,
            alone=self._alone,
        )

    def _alone(self) -> bool:
        """Whether this process drives at most one delivery now."""
        return len(self.active) <= 1

    async def snapshot(
        self, delivery: AdmittedDelivery, checkpoint: str | None = None
    ) -> ThreadSnapshot:
        """The thread's committed state (latest, or at ``checkpoint``)."""
        return await self.substrate.snapshot(delivery, checkpoint)

    async def values(self, delivery: AdmittedDelivery) -> dict[str, Any]:
        """The thread's latest channel values."""
        return await self.substrate.values(delivery)

    # --- driving ---------------------------------------------------------------------------

    async def drive(
        self,
        delivery: AdmittedDelivery,
        first: dict[str, Any],
        token: int,
        ctx: DeliveryContext | None = None,
    ) -> None:
        """Run the delivery's thread from ``first`` to its next stop, under ``token``."""
        did = delivery.delivery_id
        if self.archived is not None:
            await asyncio.to_thread(self.archived.prepare, did)
        self.journals.drive(delivery)
        ctx = ctx or self.context(delivery)
        ctx.drain = ctx.drain or self.draining
        if self.interrupting:
            _interrupt(ctx)
        if self.stopping:
            _stop(ctx, self.stopping)
        self.handed_back.discard(did)
        self.active[did] = ctx
        watcher = asyncio.ensure_future(self._watch_stop(did, ctx))
        run = asyncio.ensure_future(self.substrate.run(delivery, first, token, ctx))
        self._runs[did] = run
        try:
            await run
        except asyncio.CancelledError:
            if not self.leases.lost(did):
                raise
            self.journals.forget(did)
            raise fenced(did, self.leases.state(did)["token"]) from None
        except Exception as exc:
            self.journals.forget(did)
            failure = self.substrate.error(exc, did)
            if self.leases.lost(did):
                raise fenced(did, self.leases.state(did)["token"]) from exc
            if failure.code is not ErrorCode.LEASE_FENCED:
                # Nothing of the failed step committed; say so where operators look.
                self.mark_intervention(did, f"{failure.code.value}: {failure.message}")
            raise failure from exc
        finally:
            watcher.cancel()
            self._runs.pop(did, None)
            self.active.pop(did, None)
            self.journals.release(did)
            if ctx.handed_back:
                self.handed_back.add(did)
        if ctx.stop_reason == "stop":
            clear_stop(self.leases, did)

    def drain(self, *, interrupt: bool = False) -> int:
        """Stop starting nodes: each delivery driven here ends at its next step boundary.

        Turns in flight finish and commit; a node that has not begun stays
        scheduled, and the delivery's status says it was handed back (a runner
        that shuts down queues it again: :func:`host._queue.drive_queued`).

        With ``interrupt`` (a runner whose grace ran out) the turns in flight end
        as well: each executor is stopped, its workspace restored to the turn's
        base savepoint, and its node halted as handed back, so the next runner
        runs that attempt again. Returns how many deliveries this reached.
        """
        self.draining = True
        self.interrupting = self.interrupting or interrupt
        for ctx in self.active.values():
            ctx.drain = True
            if interrupt:
                _interrupt(ctx)
        return len(self.active)

    def stop_all(self, reason: str) -> int:
        """Stop every delivery this process drives, and any it starts driving from now on.

        What an operator's ``stop`` does, asked of this process itself (an inline
        command that received SIGINT or SIGTERM): turns in flight end, their
        workspaces are restored, the nodes are halted with ``reason`` and each
        delivery rests ``stopped`` until a directive. Returns how many
        deliveries were being driven.
        """
        self.stopping = reason
        for ctx in self.active.values():
            _stop(ctx, reason)
        return len(self.active)

    def _lease_lost(self, delivery_id: str) -> None:
        """A renewal found the lease taken over: stop driving at once, write nothing more."""
        run = self._runs.get(delivery_id)
        if run is not None:
            run.cancel()

    def mark_intervention(self, delivery_id: str, message: str) -> None:
        """Put the delivery in intervention with ``message`` (a fenced status write)."""
        row = self.store.delivery(delivery_id)
        if row is None:
            return
        with self.leases.transaction(delivery_id) as tx:
            tx.set_status(
                delivery_id,
                DeliveryStatus.INTERVENTION.value,
                ErrorCode.INTERVENTION_REQUIRED.value,
                {**row["detail"], "message": message},
                None,
            )

    async def _watch_stop(self, delivery_id: str, ctx: DeliveryContext) -> None:
        """Poll for an operator's stop request made by another process.

        A delivery this operation admitted was stored a moment ago: a request can
        only come after that, so its first poll waits one interval like the others.
        """
        if ctx.fresh:
            await asyncio.sleep(STOP_POLL_S)
        while not ctx.stop.is_set():
            request = stop_request(self.store, delivery_id)
            if request is not None:
                ctx.stop_request = request
                ctx.stop_reason = ctx.stop_reason or "stop"
                ctx.stop.set()
                return
            await asyncio.sleep(STOP_POLL_S)


def _interrupt(ctx: DeliveryContext) -> None:
    """End the turns in flight of a delivery being handed back (unless it stops already)."""
    ctx.drain = True
    ctx.stop_reason = ctx.stop_reason or "handback"
    ctx.stop.set()


def _stop(ctx: DeliveryContext, reason: str) -> None:
    """An operator's stop without an operator's name: ``reason`` says who asked."""
    if not ctx.stop_request:
        ctx.stop_request = {"actor": "", "reason": reason}
    ctx.stop_reason = ctx.stop_reason or "stop"
    ctx.stop.set()


class AdmittedCache:
    """Admitted deliveries parsed from their stored documents, by delivery id (bounded).

    Parsing a document validates every model of it and canonicalizes it twice
    (the model's own check, then its digest): about a tenth of an answer's
    round trip on a small graph, and more on a large one. A document never
    changes once admitted, so a parse is reused while the stored bytes are the
    same bytes; the caller still compares the digest with the row's. Reusing
    the one object also lets the compiled-graph cache find its graph by
    identity instead of digesting it again.
    """

    ENTRIES = 128
    """Deliveries kept at most."""
    BYTES = 32 * 1024 * 1024
    """Document bytes kept at most (a large graph's document can be megabytes)."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, tuple[bytes, AdmittedDelivery]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def parsed(self, delivery_id: str, document: bytes) -> AdmittedDelivery:
        """The delivery ``document`` holds, parsed once for as long as it is kept."""
        with self._lock:
            known = self._entries.get(delivery_id)
            if known is not None and known[0] == document:
                self._entries.move_to_end(delivery_id)
                return known[1]
        delivery = AdmittedDelivery.model_validate_json(document)
        with self._lock:
            old = self._entries.pop(delivery_id, None)
            if old is not None:
                self._bytes -= len(old[0])
            self._entries[delivery_id] = (document, delivery)
            self._bytes += len(document)
            while len(self._entries) > self.ENTRIES or (
                self._bytes > self.BYTES and len(self._entries) > 1
            ):
                _, (dropped, _) = self._entries.popitem(last=False)
                self._bytes -= len(dropped)
        return delivery
