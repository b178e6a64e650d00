"""The LangGraph Host: the ``CoordinatorHost`` capability on LangGraph + SQLite.

Creating a Host opens the store and creates the Host's tables; it compiles
nothing and starts nothing. LangGraph itself is imported on first use, so
reading commands never pay for it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from contracts import (
    ActionNode,
    AdmittedDelivery,
    Custody,
    ErrorCode,
    canonical_bytes,
    error,
)
from contracts._invocation import Invoker
from contracts._status import StatusReport
from host._journal_book import JournalBook
from host._lease import FencedCustody, LeaseManager, fenced, holder_name
from host._operations import Operation
from host._resumes import check_resolution, match_correlation
from host._views import (
    ORPHANED_DIRECTIVES,
    derive_status,
    inspect_report,
    list_report,
    status_report,
)
from host._views import _iso as iso_time
from host.langgraph import _operator
from host.langgraph._context import DeliveryContext, StepWriter
from host.storage import Storage
from host.storage.sqlite import SqliteStorage

RECURSION_LIMIT = 1_000_000
"""LangGraph's super-step bound; cycles are bounded by max_visits instead."""

_HALTED = {"completed", "failed", "cancelled", "retired"}


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
        "run": {"status": "running", "outcome": "", "message": "started"},
        "visits": {start: 1},
        "activations": {start: 1},
        "pending": {start: site},
        "wake": {start: {}},
        "savepoint": {"head": head},
    }
    if writer.outbox:
        first["outbox"] = writer.outbox
    return first


class LangGraphHost:
    """Runs admitted deliveries on private LangGraph threads in one store."""

    def __init__(
        self,
        *,
        store_path: Path | None,
        data_dir: Path,
        custody: Custody,
        invoker: Invoker,
        operations: Mapping[str, Operation],
        lease_ttl_s: float = 30.0,
        read_only: bool = False,
        storage: Storage | None = None,
    ) -> None:
        self.store_path = store_path
        self.data_dir = data_dir
        if storage is None:
            assert store_path is not None, "an SQLite store needs its path"
            storage = SqliteStorage.open(store_path, readonly=read_only)
            if not read_only:
                storage.setup()
        # A storage handed in is opened and set up by whoever made it (the factory).
        self.store: Storage = storage
        self.custody = custody
        self.invoker = invoker
        self.operations = dict(operations)
        self.journals = JournalBook(self.store)
        self.holder = holder_name(uuid.uuid4().hex[:12])
        self.leases = LeaseManager(
            self.store, data_dir / "locks", self.holder, lease_ttl_s, on_lost=self._lease_lost
        )
        self._engine: tuple[Any, Any] | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._active: dict[str, DeliveryContext] = {}
        """Deliveries this process is driving now, by id (a stop reaches them directly)."""
        self._runs: dict[str, asyncio.Future[Any]] = {}
        """The graph run driving each active delivery (a lost lease cancels it)."""
        self._records: OrderedDict[str, Any] = OrderedDict()

    # --- engine (lazy: importing LangGraph costs most of a second) -----------------------

    def engine(self) -> tuple[Any, Any]:
        """(saver, graph cache), created on first use."""
        if self._engine is None:
            from host.langgraph._compile import GraphCache

            saver: Any
            if isinstance(self.store, SqliteStorage):
                from host.langgraph._saver import HostSaver

                saver = HostSaver(self.store, self.journals, derive_status)
            else:
                from host.langgraph._pg_saver import PgHostSaver
                from host.storage.postgres import PostgresStorage

                assert isinstance(self.store, PostgresStorage)
                saver = PgHostSaver(self.store, self.journals, derive_status)
            saver.setup()
            self._engine = (saver, GraphCache(saver))
        return self._engine

    @property
    def compiles(self) -> int:
        """Graphs compiled so far by this Host."""
        return 0 if self._engine is None else int(self._engine[1].compiles)

    def _lock(self, delivery: str) -> asyncio.Lock:
        return self._locks.setdefault(delivery, asyncio.Lock())

    def _cache_record(self, digest: str, value: Any) -> None:
        self._records[digest] = value
        self._records.move_to_end(digest)
        while len(self._records) > 10_000:
            self._records.popitem(last=False)

    def _load_record(self, digest: str) -> Any:
        if digest in self._records:
            return self._records[digest]
        value = self.store.get_record(digest)
        self._cache_record(digest, value)
        return value

    def _runnable(self, delivery_id: str) -> None:
        status = self.status(delivery_id).status.value
        if status in {"stopped", "intervention", "completed", "failed", "cancelled"}:
            raise error(
                ErrorCode.DELIVERY_NOT_RUNNABLE,
                f"the delivery is {status}",
                path=delivery_id,
                expected="'execsys recover' first"
                if status in {"stopped", "intervention"}
                else "a delivery that has not ended",
            )

    def _delivery(self, delivery_id: str) -> AdmittedDelivery:
        row = self.store.delivery(delivery_id)
        if row is None:
            raise error(
                ErrorCode.DELIVERY_NOT_FOUND,
                "no such delivery",
                path=delivery_id,
                expected="a delivery id listed by 'execsys status'",
            )
        if row["status"] == "retired":
            raise error(ErrorCode.DELIVERY_RETIRED, "the delivery is retired", path=delivery_id)
        delivery = AdmittedDelivery.model_validate_json(row["document"])
        if delivery.digest != row["digest"]:
            raise error(
                ErrorCode.STORE_ERROR,
                "stored delivery does not match its digest",
                path=delivery_id,
                expected=row["digest"],
            )
        return delivery

    # --- operations -----------------------------------------------------------------------

    async def run(
        self, delivery: AdmittedDelivery, *, seed: str | None = None, created_by: str = "runner"
    ) -> StatusReport:
        """Admit ``delivery`` into the store and run it to its next stop."""
        did = delivery.delivery_id
        async with self._lock(did):
            if self.store.delivery(did) is not None:
                raise error(
                    ErrorCode.DELIVERY_EXISTS,
                    "this delivery was already started",
                    path=did,
                    expected="'execsys status' or 'execsys recover'",
                )
            token = self.leases.acquire(did)
            try:
                head = await asyncio.to_thread(self.custody.open, delivery.delivery_id, seed)
                with self.leases.transaction(did) as tx:
                    tx.insert_delivery(
                        did,
                        delivery.graph.graph,
                        delivery.graph_digest,
                        delivery.digest,
                        canonical_bytes(delivery.model_dump(mode="json")),
                    )
                    self.journals.create(tx, delivery, created_by)
                ctx = self._context(delivery)
                await self._drive(delivery, first_input(delivery, head, ctx), token, ctx)
            finally:
                self.leases.release(did)
        return self.status(did)

    async def answer(self, delivery_id: str, correlation: str, response: Any) -> StatusReport:
        """Continue a suspended action with the answer to its question (action-input)."""
        async with self._lock(delivery_id):
            delivery = self._delivery(delivery_id)
            token = self.leases.acquire(delivery_id, wait_s=10.0)
            try:
                values = await self._values(delivery)
                known = (values.get("correlations") or {}).get(correlation)
                if known != "answered":
                    self._runnable(delivery_id)
                node = match_correlation(delivery_id, values, correlation)
                wake = {
                    "wake": {node: {"correlation": correlation, "response": response}},
                    "correlations": {correlation: "answered"},
                    "run": {"status": "running", "outcome": "", "message": f"answer for '{node}'"},
                }
                await self._drive(delivery, wake, token)
            finally:
                self.leases.release(delivery_id)
        return self.status(delivery_id)

    async def resolve(
        self, delivery_id: str, node: str, actor: str, role: str, result: Any
    ) -> StatusReport:
        """Record an admitted actor's resolution of a pending workflow wait."""
        async with self._lock(delivery_id):
            delivery = self._delivery(delivery_id)
            token = self.leases.acquire(delivery_id, wait_s=10.0)
            try:
                self._runnable(delivery_id)
                values = await self._values(delivery)
                check_resolution(delivery, values, node, actor, role, result)
                wake = {
                    "wake": {node: {"approval": {"actor": actor, "role": role, "result": result}}},
                    "run": {
                        "status": "running",
                        "outcome": "",
                        "message": f"{actor} resolved '{node}'",
                    },
                }
                await self._drive(delivery, wake, token)
            finally:
                self.leases.release(delivery_id)
        return self.status(delivery_id)

    async def stop(
        self,
        delivery_id: str,
        *,
        actor: str = "operator",
        wait_s: float = 30.0,
        reason: str = "",
    ) -> StatusReport:
        """Bring the delivery to ``stopped`` at its next safe boundary."""
        return await _operator.stop(self, delivery_id, actor, wait_s, reason)

    async def recover(
        self,
        delivery_id: str,
        directive: str,
        *,
        actor: str = "operator",
        reason: str,
        node: str | None = None,
        result: Any = None,
        fail: bool = False,
        savepoint: str | None = None,
    ) -> StatusReport:
        """Apply a recovery directive (continue, restart-from-savepoint, intervene)."""
        return await _operator.recover(
            self,
            delivery_id,
            directive,
            actor=actor,
            reason=reason,
            node=node,
            result=result,
            fail=fail,
            savepoint=savepoint,
        )

    async def cancel(
        self, delivery_id: str, *, actor: str = "operator", reason: str = ""
    ) -> StatusReport:
        """Stop the delivery and end it as cancelled (nothing can continue it)."""
        from host.langgraph._cancel import cancel

        return await cancel(self, delivery_id, actor, reason)

    async def invalidate(
        self, delivery_id: str, node: str, *, actor: str = "operator", reason: str
    ) -> StatusReport:
        """Invalidate a node's latest activation and everything that depended on it."""
        return await _operator.invalidate(self, delivery_id, node, actor=actor, reason=reason)

    async def retire(
        self, delivery_id: str, authorization: str, *, actor: str = "operator"
    ) -> dict[str, Any]:
        """Delete the thread's Host-owned records once; return the durable retirement fact."""
        return await _operator.retire(self, delivery_id, authorization, actor)

    def needs_directive(self) -> list[dict[str, Any]]:
        """Deliveries only a directive can move, with the reasons (dispatches nothing)."""
        return _operator.needs_directive(self)

    def status(self, delivery_id: str) -> StatusReport:
        """The delivery's current status (from the store; no LangGraph)."""
        return status_report(self.store, delivery_id)

    def inspect(self, delivery_id: str) -> dict[str, Any]:
        """Status, node states and attempts, heads, and the directives possible now."""
        row = self.store.delivery(delivery_id)
        if row is not None and row["status"] == "retired":
            report = status_report(self.store, delivery_id).public()
            return {
                **report,
                "graph": row["graph"],
                "retirement": self.store.retirement_fact(delivery_id),
                "directives": [],
            }
        report = inspect_report(self.store, delivery_id)
        active = report.pop("active")
        report["interrupted"] = []
        report["lease"] = self.leases.state(delivery_id)
        if report["status"] == "running" and report["lease"]["state"] != "held":
            # Its runner died or stopped renewing mid-step: whatever is active was
            # interrupted with it, and only a directive moves the delivery.
            why = "its runner stopped before the attempt's result committed"
            report["interrupted"] = [{**a, "reason": why} for a in active]
            report["needs_directive"] = (
                _operator.HUNG if report["lease"]["state"] == "expired" else _operator.ORPHANED
            )
            report["directives"] = list(ORPHANED_DIRECTIVES)
        report["custody"]["head"] = _operator.custody_head(self, delivery_id)
        report["savepoints"] = self.store.savepoint_checkpoints(delivery_id)
        report["mismatches"] = _operator.consistency(self, delivery_id)
        return report

    def admitted(self, delivery_id: str) -> AdmittedDelivery:
        """The stored admitted delivery (read-only; refused once retired)."""
        return self._delivery(delivery_id)

    def record(self, digest: str) -> Any:
        """A content-addressed record (a node's outputs, a selection, an approval)."""
        return self._load_record(digest)

    def journal_lines(self, delivery_id: str) -> list[bytes]:
        """The delivery's stored journal: header line, then events by ordinal."""
        if self.store.delivery(delivery_id) is None:
            raise error(ErrorCode.DELIVERY_NOT_FOUND, "no such delivery", path=delivery_id)
        return self.store.journal_lines(delivery_id)

    def delivery_document(self, delivery_id: str) -> dict[str, Any]:
        """The admitted delivery's stored document (retired deliveries keep theirs)."""
        row = self.store.delivery(delivery_id)
        if row is None:
            raise error(ErrorCode.DELIVERY_NOT_FOUND, "no such delivery", path=delivery_id)
        document: dict[str, Any] = json.loads(row["document"])
        return document

    def deliveries(self) -> list[dict[str, Any]]:
        """Every delivery in the store."""
        return list_report(self.store)

    def delivery_page(
        self,
        *,
        limit: int = 50,
        offset: int = 0,
        status: str | None = None,
        graph: str | None = None,
        changed_since: float | None = None,
    ) -> dict[str, Any]:
        """One page of the listing (read-only); see ``CoordinatorHost.delivery_page``."""
        rows, total = self.store.page_deliveries(
            limit=limit, offset=offset, status=status, graph=graph, changed_since=changed_since
        )
        listed = [
            {**row, "updated": iso_time(row["updated"]), "changed": row["updated"]} for row in rows
        ]
        return {"deliveries": listed, "total": total}

    def close(self) -> None:
        """Release leases and close the store."""
        self.leases.close()
        self.store.close()

    # --- internals ------------------------------------------------------------------------

    def _config(
        self, delivery: AdmittedDelivery, ctx: DeliveryContext | None = None
    ) -> dict[str, Any]:
        from host.langgraph._compile import CONTEXT_KEY

        if ctx is None:
            ctx = self._context(delivery)
        return {
            "configurable": {"thread_id": delivery.delivery_id, CONTEXT_KEY: ctx},
            "recursion_limit": RECURSION_LIMIT,
        }

    def _context(self, delivery: AdmittedDelivery) -> DeliveryContext:
        _, graphs = self.engine()
        _, info = graphs.get(delivery.graph)
        return DeliveryContext(
            delivery=delivery,
            info=info,
            custody=FencedCustody(self.custody, self.leases),
            invoker=self.invoker,
            operations=self.operations,
            load_record=self._load_record,
            cache_record=self._cache_record,
        )

    async def _snapshot(self, delivery: AdmittedDelivery) -> tuple[dict[str, Any], list[str]]:
        """(channel values, the nodes LangGraph still has tasks for from an interrupted step)."""
        _, graphs = self.engine()
        graph, _ = graphs.get(delivery.graph)
        snapshot = await graph.aget_state(self._config(delivery))
        # 'tasks', not 'next': a task whose writes were saved before the crash is
        # still pending although 'next' no longer lists it.
        return dict(snapshot.values or {}), sorted({str(t.name) for t in snapshot.tasks})

    async def _values(self, delivery: AdmittedDelivery) -> dict[str, Any]:
        values, _ = await self._snapshot(delivery)
        return values

    async def _drive(
        self,
        delivery: AdmittedDelivery,
        first: Any,
        token: int,
        ctx: DeliveryContext | None = None,
    ) -> None:
        saver, graphs = self.engine()
        graph, _ = graphs.get(delivery.graph)
        did = delivery.delivery_id
        self.journals.drive(delivery)
        saver.tokens[did] = token
        ctx = ctx or self._context(delivery)
        self._active[did] = ctx
        watcher = asyncio.ensure_future(self._watch_stop(did, ctx))
        run = asyncio.ensure_future(
            graph.ainvoke(first, self._config(delivery, ctx), durability="sync")
        )
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
            from host.langgraph._errors import substrate_error

            failure = substrate_error(exc, did)
            if self.leases.lost(did):
                raise fenced(did, self.leases.state(did)["token"]) from exc
            if failure.code is not ErrorCode.LEASE_FENCED:
                # Nothing of the failed step committed; say so where operators look.
                self._mark_intervention(did, f"{failure.code.value}: {failure.message}")
            raise failure from exc
        finally:
            watcher.cancel()
            self._runs.pop(did, None)
            self._active.pop(did, None)
            saver.tokens.pop(did, None)
            self.journals.release(did)
        if ctx.stop_reason == "stop":
            _operator.clear_stop(self, did)

    def _lease_lost(self, delivery_id: str) -> None:
        """A renewal found the lease taken over: stop driving at once, write nothing more."""
        run = self._runs.get(delivery_id)
        if run is not None:
            run.cancel()

    def _mark_intervention(self, delivery_id: str, message: str) -> None:
        row = self.store.delivery(delivery_id)
        if row is None:
            return
        with self.leases.transaction(delivery_id) as tx:
            tx.set_status(
                delivery_id,
                "intervention",
                ErrorCode.INTERVENTION_REQUIRED.value,
                {**row["detail"], "message": message},
                None,
            )

    async def _watch_stop(self, delivery_id: str, ctx: DeliveryContext) -> None:
        """Poll for an operator's stop request made by another process."""
        while not ctx.stop.is_set():
            request = _operator.stop_request(self, delivery_id)
            if request is not None:
                ctx.stop_request = request
                ctx.stop_reason = ctx.stop_reason or "stop"
                ctx.stop.set()
                return
            await asyncio.sleep(0.2)
