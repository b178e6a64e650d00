"""The Host's capability as its users see it, independent of any substrate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from contracts import (
    AdmittedDelivery,
    CorrelationId,
    Custody,
    DeliveryId,
    NodeId,
    SavepointId,
)
from contracts._invocation import Invoker
from contracts._status import RecoveryDirective, StatusReport
from host._goals import GoalTable
from host._operations import Operation
from host._reports import (
    DeliveryPage,
    DeliverySummary,
    InspectReport,
    NeededDirective,
    RetirementFact,
    RunnerView,
)


class CoordinatorHost(Protocol):
    """What a Host factory returns: run, resume and observe admitted deliveries."""

    async def run(
        self, delivery: AdmittedDelivery, *, seed: str | None = None, created_by: str = "runner"
    ) -> StatusReport:
        """Admit the delivery into the Host's store and run it to its next stop."""
        ...

    async def submit(
        self, delivery: AdmittedDelivery, *, seed: str | None = None, created_by: str = "runner"
    ) -> StatusReport:
        """Admit the delivery into the Host's store as ``queued``, running nothing of it."""
        ...

    def queued_deliveries(self, limit: int) -> list[DeliveryId]:
        """Up to ``limit`` queued deliveries, longest waiting first (claim candidates)."""
        ...

    async def drive_queued(self, delivery_id: DeliveryId) -> StatusReport | None:
        """Claim a queued delivery and drive it to its next stop; None if it was not claimed."""
        ...

    def runner_heartbeat(self, name: str, started: float) -> None:
        """Record that the runner ``name`` (this process) is alive now."""
        ...

    def runner_gone(self, name: str) -> None:
        """Remove the runner ``name``'s heartbeat row (it stopped cleanly)."""
        ...

    def runners(self) -> list[RunnerView]:
        """The live runners: name, host, pid, start, last heartbeat, deliveries held."""
        ...

    async def answer(
        self,
        delivery_id: DeliveryId,
        correlation: CorrelationId,
        response: Any,
        *,
        actor: str | None = None,
        queue: bool = False,
    ) -> StatusReport:
        """Continue the action-input suspension ``correlation`` with ``response``.

        ``actor`` names who answered (an agent, journaled as automation); without it
        the answer is journaled as the Host's own. With ``queue`` the answer is
        checked and recorded, and the delivery becomes ``queued`` for a runner.
        """
        ...

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
        """Record an admitted actor's resolution of the workflow wait at ``node``.

        With ``queue`` (as for :meth:`answer`) it is checked and recorded, and the
        delivery becomes ``queued`` for a runner to drive.
        """
        ...

    async def stop(
        self,
        delivery_id: DeliveryId,
        *,
        actor: str = "operator",
        wait_s: float = 30.0,
        reason: str = "",
    ) -> StatusReport:
        """Bring the delivery to ``stopped`` at its next safe boundary."""
        ...

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
        """Apply a recovery directive: continue, restart-from-savepoint or intervene.

        With ``queue`` the directive is recorded and a runner (``execsys serve``) applies it.
        """
        ...

    async def cancel(
        self, delivery_id: DeliveryId, *, actor: str = "operator", reason: str = ""
    ) -> StatusReport:
        """Stop the delivery and end it as cancelled (nothing can continue it)."""
        ...

    async def invalidate(
        self, delivery_id: DeliveryId, node: NodeId, *, actor: str = "operator", reason: str
    ) -> StatusReport:
        """Invalidate a node's latest activation and everything that depended on it."""
        ...

    async def retire(
        self, delivery_id: DeliveryId, authorization: str, *, actor: str = "operator"
    ) -> RetirementFact:
        """Delete the thread's Host-owned records once; return the durable retirement fact."""
        ...

    def needs_directive(self) -> list[NeededDirective]:
        """Deliveries that only a directive can move, and why (startup dispatches nothing)."""
        ...

    def status(self, delivery_id: DeliveryId) -> StatusReport:
        """The delivery's current status."""
        ...

    def inspect(self, delivery_id: DeliveryId) -> InspectReport:
        """Status, node states and attempts, journal/custody/checkpoint heads, directives."""
        ...

    @property
    def goals(self) -> GoalTable:
        """The goal rows an application (CodeClosure) keeps on this Host's store.

        Versioned rows moved by compare-and-set, with a note log; stored through
        the storage port, so they live on whichever backend the store is.
        """
        ...

    def lease_counts(self) -> dict[str, int]:
        """Counts of this Host instance's lease work since it was created.

        ``granted`` (leases taken), ``renewed`` (expiries pushed ahead), ``lost``
        (renewals that found the lease taken over) and ``fenced`` (writes refused
        because another holder's token is newer).
        """
        ...

    def admitted(self, delivery_id: DeliveryId) -> AdmittedDelivery:
        """The delivery as it was admitted: its graph, input and authority policy."""
        ...

    def record(self, digest: str) -> Any:
        """A content-addressed record referenced by a journal event."""
        ...

    def journal_lines(self, delivery_id: DeliveryId) -> list[bytes]:
        """The delivery's journal as canonical lines, header first."""
        ...

    def delivery_document(self, delivery_id: DeliveryId) -> dict[str, Any]:
        """The admitted delivery as stored (graph, input, authority, executors, nonce).

        Read-only; also answers for a retired delivery, whose document is kept.
        """
        ...

    def deliveries(self) -> list[DeliverySummary]:
        """Every delivery the Host's store holds."""
        ...

    def delivery_page(
        self,
        *,
        limit: int = 50,
        offset: int = 0,
        status: str | None = None,
        graph: str | None = None,
        changed_since: float | None = None,
    ) -> DeliveryPage:
        """One page of deliveries, latest change first, and how many match in all.

        Rows are those of ``deliveries()`` (``changed`` is the last change as epoch
        seconds); ``changed_since`` keeps only rows changed at or after that instant.
        """
        ...

    def close(self) -> None:
        """Release leases and storage."""
        ...


class HostFactory(Protocol):
    """Creates a Host from its exact configuration; creation compiles and starts nothing."""

    def create(
        self, *, custody: Custody, invoker: Invoker, operations: Mapping[str, Operation]
    ) -> CoordinatorHost:
        """Validate the configuration, create private storage, return the Host."""
        ...
