"""The Workflow Host: the ``CoordinatorHost`` capability on the core and its two ports.

Creating a Host opens nothing beyond its storage handle: it compiles nothing
and starts nothing, and the substrate is created on first use, so reading
commands never pay for it. Each operation takes the delivery's in-process lock
and its lease, then hands the delivery's thread to :meth:`HostCore.drive` or to
the module that owns the operation's rule (stop, directives, cancel,
invalidation, retirement, views).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from typing import Any

from contracts import (
    AdmittedDelivery,
    CorrelationId,
    DeliveryId,
    ErrorCode,
    NodeId,
    SavepointId,
    canonical_bytes,
    error,
)
from contracts._status import DeliveryStatus, RecoveryDirective, StatusReport
from host import _health, _stop
from host._core import HostCore, first_input
from host._queued import queue_request
from host._reports import (
    DeliveryPage,
    DeliverySummary,
    InspectReport,
    LeaseView,
    NeededDirective,
    RetirementFact,
    RunnerView,
    SavepointView,
)
from host._resumes import check_resolution, match_correlation
from host._views import ORPHANED_DIRECTIVES, inspect_report, list_report, status_report, summary
from host._views import _iso as iso_time

LIVE_S = 10.0
"""A runner whose heartbeat is older than this is not listed as live (it beats every 2 s)."""


class WorkflowHost(HostCore):
    """Runs admitted deliveries on private durable threads in one store."""

    # --- operations -----------------------------------------------------------------------

    async def run(
        self, delivery: AdmittedDelivery, *, seed: str | None = None, created_by: str = "runner"
    ) -> StatusReport:
        """Admit ``delivery`` into the store and run it to its next stop."""
        did = delivery.delivery_id
        async with self.lock(did):
            token = self._refuse_known(did)
            try:
                head = await self._admit(delivery, seed, created_by, queued=False)
                ctx = self.context(delivery)
                ctx.fresh = True
                await self.drive(delivery, first_input(delivery, head, ctx), token, ctx)
            finally:
                self.leases.release(did)
        return self.status(did)

    async def submit(
        self, delivery: AdmittedDelivery, *, seed: str | None = None, created_by: str = "runner"
    ) -> StatusReport:
        """Admit ``delivery`` into the store as ``queued``: a runner fleet drives it later.

        Custody is opened and the journal header written, as for :meth:`run`;
        the status row keeps the custody head the first step starts from.
        """
        did = delivery.delivery_id
        async with self.lock(did):
            self._refuse_known(did)
            try:
                await self._admit(delivery, seed, created_by, queued=True)
            finally:
                self.leases.release(did)
        return self.status(did)

    def queued_deliveries(self, limit: int) -> list[DeliveryId]:
        """Up to ``limit`` queued deliveries, longest waiting first (claim candidates)."""
        return [DeliveryId(d) for d in self.store.queued(limit)]

    async def drive_queued(self, delivery_id: DeliveryId) -> StatusReport | None:
        """Claim a queued delivery and drive it to its next stop; None if not claimed."""
        from host import _queue  # lazy: only runners load the operation

        return await _queue.drive_queued(self, delivery_id)

    def runner_heartbeat(self, name: str, started: float) -> None:
        """Record that the runner ``name`` (this process) is alive now."""
        self.store.beat_runner(name, socket.gethostname(), os.getpid(), started)

    def runner_gone(self, name: str) -> None:
        """Remove the runner ``name``'s heartbeat row (it stopped cleanly)."""
        self.store.drop_runner(name)

    def runners(self, *, live_s: float = LIVE_S) -> list[RunnerView]:
        """Runners whose last heartbeat is at most ``live_s`` old, with the deliveries they hold."""
        now = time.time()
        return [
            RunnerView(
                name=row["name"],
                host=row["host"],
                pid=row["pid"],
                started=iso_time(row["started"]),
                heartbeat=iso_time(row["heartbeat"]),
                deliveries=tuple(DeliveryId(d) for d in row["deliveries"]),
                age_s=round(max(0.0, now - row["heartbeat"]), 3),
            )
            for row in self.store.runners()
            if now - row["heartbeat"] <= live_s
        ]

    def _refuse_known(self, did: str) -> int:
        """Refuse a delivery already in the store; otherwise take its lease.

        A delivery never stored nor leased gets its lease in one write; any
        other case takes the general path (which may find it stored).
        """
        token = self.leases.acquire_new(did)
        if token is not None:
            return token
        if self.store.delivery(did) is not None:
            raise error(
                ErrorCode.DELIVERY_EXISTS,
                "this delivery was already started",
                path=did,
                expected="'execsys status' or 'execsys recover'",
            )
        return self.leases.acquire(did)

    async def _admit(
        self, delivery: AdmittedDelivery, seed: str | None, created_by: str, *, queued: bool
    ) -> str:
        """Open custody, store the delivery and its journal header; return the custody head."""
        did = delivery.delivery_id
        head = await asyncio.to_thread(self.custody.open, did, seed)
        with self.leases.transaction(did, writes_only=True) as tx:
            tx.insert_delivery(
                did,
                delivery.graph.graph,
                delivery.graph_digest,
                delivery.digest,
                canonical_bytes(delivery.model_dump(mode="json")),
            )
            self.journals.create(tx, delivery, created_by)
            if queued:
                detail = {"message": "queued for a runner", "queued_head": head}
                tx.set_status(did, DeliveryStatus.QUEUED.value, None, detail, None)
        return str(head)

    async def answer(
        self,
        delivery_id: DeliveryId,
        correlation: CorrelationId,
        response: Any,
        *,
        actor: str | None = None,
        queue: bool = False,
    ) -> StatusReport:
        """Continue a suspended action with the answer to its question (action-input).

        With ``queue`` the answer is checked and recorded, and a runner drives it.
        """
        async with self.lock(delivery_id):
            delivery = self.delivery(delivery_id)
            token = self.leases.acquire(delivery_id, wait_s=10.0)
            try:
                wake = await self.answer_wake(delivery, correlation, response, actor)
                if queue:
                    request = {"correlation": correlation, "response": response, "actor": actor}
                    queue_request(self, delivery_id, "answer", request)
                else:
                    await self.drive(delivery, wake, token)
            finally:
                self.leases.release(delivery_id)
        return self.status(delivery_id)

    async def answer_wake(
        self, delivery: AdmittedDelivery, correlation: str, response: Any, actor: str | None
    ) -> dict[str, Any]:
        """The checked input that continues a suspension with its answer (lease held)."""
        did = delivery.delivery_id
        values = await self.values(delivery)
        known = (values.get("correlations") or {}).get(correlation)
        if known != "answered":
            self.runnable(did)
        node = match_correlation(did, values, correlation)
        return {
            "wake": {node: {"correlation": correlation, "response": response, "actor": actor}},
            "correlations": {correlation: "answered"},
            "run": {"status": "running", "outcome": "", "message": f"answer for '{node}'"},
        }

    async def resolve(
        self,
        delivery_id: DeliveryId,
        node: NodeId,
        actor: str,
        role: str,
        result: Any,
        *,
        queue: bool = False,
    ) -> StatusReport:
        """Record an admitted actor's resolution of a pending workflow wait.

        With ``queue`` the resolution is checked and recorded, and a runner drives it.
        """
        async with self.lock(delivery_id):
            delivery = self.delivery(delivery_id)
            token = self.leases.acquire(delivery_id, wait_s=10.0)
            try:
                wake = await self.resolve_wake(delivery, node, actor, role, result)
                if queue:
                    request = {"node": node, "actor": actor, "role": role, "result": result}
                    queue_request(self, delivery_id, "resolve", request)
                else:
                    await self.drive(delivery, wake, token)
            finally:
                self.leases.release(delivery_id)
        return self.status(delivery_id)

    async def resolve_wake(
        self, delivery: AdmittedDelivery, node: str, actor: str, role: str, result: Any
    ) -> dict[str, Any]:
        """The checked input that resolves the wait at ``node`` (lease held)."""
        self.runnable(delivery.delivery_id)
        values = await self.values(delivery)
        check_resolution(delivery, values, node, actor, role, result)
        return {
            "wake": {node: {"approval": {"actor": actor, "role": role, "result": result}}},
            "run": {"status": "running", "outcome": "", "message": f"{actor} resolved '{node}'"},
        }

    async def stop(
        self,
        delivery_id: DeliveryId,
        *,
        actor: str = "operator",
        wait_s: float = 30.0,
        reason: str = "",
    ) -> StatusReport:
        """Bring the delivery to ``stopped`` at its next safe boundary."""
        return await _stop.stop(self, delivery_id, actor, wait_s, reason)

    async def recover(
        self,
        delivery_id: DeliveryId,
        directive: RecoveryDirective | str,
        *,
        actor: str = "operator",
        reason: str,
        node: NodeId | None = None,
        result: Any = None,
        fail: bool = False,
        savepoint: SavepointId | None = None,
        queue: bool = False,
    ) -> StatusReport:
        """Apply a recovery directive (continue, restart-from-savepoint, intervene).

        With ``queue`` the directive is recorded and a runner applies it.
        """
        from host import _directives  # lazy: reading commands never load the operation

        return await _directives.recover(
            self,
            delivery_id,
            directive,
            actor=actor,
            reason=reason,
            node=node,
            result=result,
            fail=fail,
            savepoint=savepoint,
            queue=queue,
        )

    async def cancel(
        self, delivery_id: DeliveryId, *, actor: str = "operator", reason: str = ""
    ) -> StatusReport:
        """Stop the delivery and end it as cancelled (nothing can continue it)."""
        from host import _cancel  # lazy: reading commands never load the operation

        return await _cancel.cancel(self, delivery_id, actor, reason)

    async def invalidate(
        self, delivery_id: DeliveryId, node: NodeId, *, actor: str = "operator", reason: str
    ) -> StatusReport:
        """Invalidate a node's latest activation and everything that depended on it."""
        from host import _invalidate  # lazy: reading commands never load the operation

        return await _invalidate.invalidate(self, delivery_id, node, actor=actor, reason=reason)

    async def retire(
        self, delivery_id: DeliveryId, authorization: str, *, actor: str = "operator"
    ) -> RetirementFact:
        """Delete the thread's Host-owned records once; return the durable retirement fact."""
        from host import _retire  # lazy: reading commands never load the operation

        return await _retire.retire(self, delivery_id, authorization, actor)

    def needs_directive(self) -> list[NeededDirective]:
        """Deliveries only a directive can move, with the reasons (dispatches nothing)."""
        return _health.needs_directive(self)

    def inspect(self, delivery_id: DeliveryId) -> InspectReport:
        """Status, node states and attempts, heads, and the directives possible now."""
        row = self.store.delivery(delivery_id)
        if row is not None and row["status"] == DeliveryStatus.RETIRED:
            status = status_report(self.store, delivery_id)
            fact = self.store.retirement_fact(delivery_id)
            return InspectReport(
                delivery=status.delivery,
                status=status.status,
                outcome=status.outcome,
                suspension=status.suspension,
                wait=status.wait,
                message=status.message,
                graph=row["graph"],
                updated=status.updated,
                retirement=RetirementFact(**fact) if fact is not None else None,
            )
        report = inspect_report(self.store, delivery_id, self.replays)
        lease = LeaseView(**self.leases.state(delivery_id))
        update: dict[str, Any] = {"interrupted": (), "lease": lease}
        if report.status == DeliveryStatus.RUNNING and lease.state != "held":
            # Its runner died or stopped renewing mid-step: whatever is active was
            # interrupted with it, and only a directive moves the delivery.
            why = "its runner stopped before the attempt's result committed"
            update["interrupted"] = tuple(
                a.model_copy(update={"reason": why}) for a in report.interrupted
            )
            update["needs_directive"] = (
                _health.HUNG if lease.state == "expired" else _health.ORPHANED
            )
            update["directives"] = ORPHANED_DIRECTIVES
        update["custody"] = report.custody.model_copy(
            update={"head": _health.custody_head(self, delivery_id)}
        )
        update["savepoints"] = tuple(
            SavepointView(**s) for s in self.store.savepoint_checkpoints(delivery_id)
        )
        update["mismatches"] = tuple(_health.consistency(self, delivery_id))
        return report.model_copy(update=update)

    def admitted(self, delivery_id: DeliveryId) -> AdmittedDelivery:
        """The stored admitted delivery (read-only; refused once retired)."""
        return self.delivery(delivery_id)

    def record(self, digest: str) -> Any:
        """A content-addressed record (a node's outputs, a selection, an approval)."""
        return self.load_record(digest)

    def journal_lines(self, delivery_id: DeliveryId) -> list[bytes]:
        """The delivery's stored journal: header line, then events by ordinal."""
        if self.store.delivery(delivery_id) is None:
            raise error(ErrorCode.DELIVERY_NOT_FOUND, "no such delivery", path=delivery_id)
        return self.store.journal_lines(delivery_id)

    def delivery_document(self, delivery_id: DeliveryId) -> dict[str, Any]:
        """The admitted delivery's stored document (retired deliveries keep theirs)."""
        row = self.store.delivery(delivery_id)
        if row is None:
            raise error(ErrorCode.DELIVERY_NOT_FOUND, "no such delivery", path=delivery_id)
        document: dict[str, Any] = json.loads(row["document"])
        return document

    def deliveries(self) -> list[DeliverySummary]:
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
    ) -> DeliveryPage:
        """One page of the listing (read-only); see ``CoordinatorHost.delivery_page``."""
        rows, total = self.store.page_deliveries(
            limit=limit, offset=offset, status=status, graph=graph, changed_since=changed_since
        )
        return DeliveryPage(deliveries=tuple(summary(row) for row in rows), total=total)

    def close(self) -> None:
        """Release leases and close the store."""
        self.leases.close()
        self.store.close()
