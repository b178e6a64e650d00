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
    AdmittedDelivery,
    Custody,
    ErrorCode,
    WaitNode,
    canonical_bytes,
    error,
    validation_problem,
)
from contracts._invocation import Invoker
from contracts._status import StatusReport
from host._operations import Operation
from host.langgraph import _operator
from host.langgraph._context import DeliveryContext
from host.langgraph._journal_book import JournalBook
from host.langgraph._lease import FencedCustody, LeaseManager, fenced, holder_name
from host.langgraph._store import Store, connect
from host.langgraph._views import derive_status, inspect_report, list_report, status_report

RECURSION_LIMIT = 1_000_000
"""LangGraph's super-step bound; cycles are bounded by max_visits instead."""

_HALTED = {"completed", "failed", "cancelled", "retired"}


def first_input(delivery: AdmittedDelivery, head: str) -> dict[str, Any]:
    """The input that starts a delivery's thread: its start node, scheduled once."""
    start = delivery.graph.start
    return {
        "run": {"status": "running", "outcome": "", "message": "started"},
        "visits": {start: 1},
        "activations": {start: 1},
        "pending": {start: {"activation": 1, "attempt": 1, "turn": 1, "predecessors": []}},
        "wake": {start: {}},
        "savepoint": {"head": head},
    }


class LangGraphHost:
    """Runs admitted deliveries on private LangGraph threads in one store."""

    def __init__(
        self,
        *,
        store_path: Path,
        data_dir: Path,
        custody: Custody,
        invoker: Invoker,
        operations: Mapping[str, Operation],
        lease_ttl_s: float = 30.0,
    ) -> None:
        self.store_path = store_path
        self.data_dir = data_dir
        self.store = Store(connect(store_path))
        self.store.setup()
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
            from host.langgraph._saver import HostSaver

            saver = HostSaver(self.store, self.journals, derive_status)
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
        row = self.store.delivery_row(delivery_id)
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
            if self.store.delivery_row(did) is not None:
                raise error(
                    ErrorCode.DELIVERY_EXISTS,
                    "this delivery was already started",
                    path=did,
                    expected="'execsys status' or 'execsys recover'",
                )
            token = self.leases.acquire(did)
            try:
                head = await asyncio.to_thread(self.custody.open, delivery.delivery_id, seed)
                with self.leases.transaction(did) as cur:
                    self.store.insert_delivery(
                        cur,
                        did,
                        delivery.graph.graph,
                        delivery.graph_digest,
                        delivery.digest,
                        canonical_bytes(delivery.model_dump(mode="json")),
                    )
                    self.journals.create(cur, delivery, created_by)
                await self._drive(delivery, first_input(delivery, head), token)
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
                node = self._match_correlation(delivery_id, values, correlation)
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
                self._check_resolution(delivery, values, node, actor, role, result)
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
        self, delivery_id: str, *, actor: str = "operator", wait_s: float = 30.0
    ) -> StatusReport:
        """Bring the delivery to ``stopped`` at its next safe boundary."""
        return await _operator.stop(self, delivery_id, actor, wait_s)

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
        return await _operator.cancel(self, delivery_id, actor, reason)

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
        row = self.store.delivery_row(delivery_id)
        if row is not None and row["status"] == "retired":
            facts = self.store.read(
                "SELECT fact FROM execsys_retirements WHERE delivery = ?", (delivery_id,)
            )
            report = status_report(self.store, delivery_id).public()
            return {
                **report,
                "graph": row["graph"],
                "retirement": json.loads(facts[0][0]) if facts else None,
                "directives": [],
            }
        report = inspect_report(self.store, delivery_id)
        report["lease"] = self.leases.state(delivery_id)
        if report["status"] == "running" and report["lease"]["state"] != "held":
            # Its runner died or stopped renewing mid-step: only a directive moves it.
            for directive in ("recover continue", "recover restart-from-savepoint"):
                if directive not in report["directives"]:
                    report["directives"].append(directive)
        report["custody"]["head"] = _operator.custody_head(self, delivery_id)
        report["savepoints"] = self.store.savepoint_checkpoints(delivery_id)
        report["mismatches"] = _operator.consistency(self, delivery_id)
        return report

    def record(self, digest: str) -> Any:
        """A content-addressed record (a node's outputs, a selection, an approval)."""
        return self._load_record(digest)

    def journal_lines(self, delivery_id: str) -> list[bytes]:
        """The delivery's stored journal: header line, then events by ordinal."""
        if self.store.delivery_row(delivery_id) is None:
            raise error(ErrorCode.DELIVERY_NOT_FOUND, "no such delivery", path=delivery_id)
        return self.store.journal_lines(delivery_id)

    def deliveries(self) -> list[dict[str, Any]]:
        """Every delivery in the store."""
        return list_report(self.store)

    def close(self) -> None:
        """Release leases and close the store."""
        self.leases.close()
        with self.store.lock:
            self.store.conn.close()

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

    async def _snapshot(self, delivery: AdmittedDelivery) -> tuple[dict[str, Any], bool]:
        """(channel values, whether LangGraph has tasks left from an interrupted step)."""
        _, graphs = self.engine()
        graph, _ = graphs.get(delivery.graph)
        snapshot = await graph.aget_state(self._config(delivery))
        # 'tasks', not 'next': a task whose writes were saved before the crash is
        # still pending although 'next' no longer lists it.
        return dict(snapshot.values or {}), bool(snapshot.tasks)

    async def _values(self, delivery: AdmittedDelivery) -> dict[str, Any]:
        values, _ = await self._snapshot(delivery)
        return values

    async def _drive(self, delivery: AdmittedDelivery, first: Any, token: int) -> None:
        saver, graphs = self.engine()
        graph, _ = graphs.get(delivery.graph)
        did = delivery.delivery_id
        self.journals.drive(delivery)
        saver.tokens[did] = token
        ctx = self._context(delivery)
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
        row = self.store.delivery_row(delivery_id)
        if row is None:
            return
        with self.leases.transaction(delivery_id) as cur:
            self.store.set_status(
                cur,
                delivery_id,
                "intervention",
                ErrorCode.INTERVENTION_REQUIRED.value,
                {**row["detail"], "message": message},
                None,
            )

    async def _watch_stop(self, delivery_id: str, ctx: DeliveryContext) -> None:
        """Poll for an operator's stop request made by another process."""
        while not ctx.stop.is_set():
            if _operator.stop_requested(self, delivery_id):
                ctx.stop_reason = ctx.stop_reason or "stop"
                ctx.stop.set()
                return
            await asyncio.sleep(0.2)

    def _match_correlation(self, delivery_id: str, values: dict[str, Any], correlation: str) -> str:
        suspensions = values.get("suspensions") or {}
        for node, suspension in suspensions.items():
            if suspension.get("correlation") == correlation:
                return str(node)
        known = (values.get("correlations") or {}).get(correlation)
        if known == "answered":
            raise error(
                ErrorCode.CORRELATION_USED, "this question was already answered", path=correlation
            )
        if known == "stale":
            raise error(
                ErrorCode.CORRELATION_STALE, "this question is no longer pending", path=correlation
            )
        if values.get("waits") and not suspensions:
            raise error(
                ErrorCode.SUSPENSION_KIND_MISMATCH,
                "the delivery waits for a workflow wait, not an action-input",
                path=delivery_id,
                expected="'execsys resolve'",
            )
        raise error(
            ErrorCode.CORRELATION_UNKNOWN,
            "no pending question has this correlation",
            path=correlation,
            expected="a correlation shown by 'execsys status'",
        )

    def _check_resolution(
        self,
        delivery: AdmittedDelivery,
        values: dict[str, Any],
        node: str,
        actor: str,
        role: str,
        result: Any,
    ) -> None:
        spec = delivery.graph.nodes.get(node)
        waits = values.get("waits") or {}
        if node in (values.get("suspensions") or {}):
            raise error(
                ErrorCode.SUSPENSION_KIND_MISMATCH,
                f"'{node}' is waiting for an action-input answer, not a resolution",
                path=node,
                expected="'execsys input'",
            )
        if not isinstance(spec, WaitNode) or node not in waits:
            raise error(
                ErrorCode.WAIT_NOT_PENDING,
                f"no workflow wait is pending at '{node}'",
                path=node,
                expected="a wait node shown by 'execsys status'",
            )
        problem = validation_problem(spec.result, result)
        if problem is not None:
            raise error(
                ErrorCode.WAIT_RESULT_INVALID,
                f"result: {problem[1]}",
                path=f"result.{problem[0]}".rstrip("."),
                expected="a value valid against the wait's result schema",
            )
        roles = delivery.authority.roles_of(actor)
        if actor not in delivery.authority.actors:
            raise error(
                ErrorCode.ACTOR_NOT_ADMITTED,
                f"actor '{actor}' is not in the delivery's authority policy",
                path=actor,
            )
        if role not in roles:
            raise error(
                ErrorCode.ROLE_NOT_ADMITTED,
                f"the authority policy does not give '{actor}' the role '{role}'",
                path=role,
                expected="one of " + ", ".join(sorted(roles)),
            )
        if role not in spec.authority.roles:
            raise error(
                ErrorCode.ROLE_NOT_ADMITTED,
                f"role '{role}' cannot resolve '{node}'",
                path=role,
                expected="one of " + ", ".join(spec.authority.roles),
            )
        pending = waits[node]
        if spec.authority.distinct_actors and any(
            a["actor"] == actor for a in pending.get("approvals", [])
        ):
            raise error(
                ErrorCode.APPROVAL_DUPLICATE_ACTOR,
                f"'{actor}' already approved this wait",
                path=actor,
                expected="an approval from a different actor",
            )
        if pending.get("approvals") and pending.get("result") != result:
            raise error(
                ErrorCode.WAIT_RESULT_INVALID,
                "the result differs from the earlier approvals of this wait",
                path="result",
                expected="the same result as the earlier approvals",
            )
