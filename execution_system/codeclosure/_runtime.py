"""The CodeClosure runtime: goals as deliveries of the CodeClosure graph on the Host.

Every command takes the goal's expected version and refuses a stale one
before doing anything; the Host's own guarantees (validated commits,
custody, the journal, suspensions, directives) apply to every phase.
"""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Any

from contracts import (
    AuthorityPolicy,
    DeliveryId,
    ErrorCode,
    ExecsysError,
    NodeId,
    SavepointId,
    error,
)
from execution_system._admission import admit, parse_graph
from execution_system._compose import data_dir, factory_config, open_runner
from execution_system.codeclosure._export import (
    EXPORTED,
    accepted,
    apply_to,
    changed,
    trees,
    unified_diff,
)
from execution_system.codeclosure._gitbundle import write_bundle
from execution_system.codeclosure._goal import (
    AgentWorker,
    CommandWorker,
    GoalStore,
    PatchWorker,
    new_goal,
)
from execution_system.codeclosure._graph import delivery_input, executors, render
from execution_system.codeclosure._operations import OPERATIONS
from execution_system.codeclosure._views import audit, goal_view, listed_status
from execution_system.codeclosure.agents._checkrun import sweep
from execution_system.custody import DEFAULT_EXCLUDED, FileCustody
from host import OPERATIONS as BUILTIN


def _operator() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


class GoalRuntime:
    """Goals and their deliveries on one store."""

    def __init__(
        self, store: str | None = None, *, lease_ttl: str | None = None, existing: bool = False
    ) -> None:
        """``existing``: the store must already exist (every goal command but ``create``)."""
        self.config = factory_config(store)
        self.runner = open_runner(
            store, operations=OPERATIONS, existing=existing, lease_ttl=lease_ttl
        )
        self.host: Any = self.runner.host
        # The goal rows live in the Host's store, on whichever backend it is.
        self.goals = GoalStore(self.runner.host.goals)

    def close(self) -> None:
        """Release the Host (and with it the goal rows' store)."""
        self.runner.close()

    def create(
        self,
        *,
        objective: str,
        project: str,
        criteria: list[str],
        checks: dict[str, tuple[str, ...]] | None = None,
        required: list[str] | None = None,
        protected: list[str] | None = None,
        max_generations: int = 3,
        worker: CommandWorker | PatchWorker | AgentWorker,
        python: str | None = None,
        allow_fewer: list[str] | None = None,
        exclude: list[str] | None = None,
    ) -> dict[str, Any]:
        """Validate and store a goal (version 1, READY); dispatch nothing."""
        goal = new_goal(
            objective=objective,
            project=project,
            criteria=criteria,
            checks=checks or {},
            required=required,
            protected=protected,
            max_generations=max_generations,
            worker=worker,
            python=python,
            allow_fewer=allow_fewer,
            exclude=exclude,
        )
        # Render and admit once now: a goal whose graph could not run is never stored.
        admit(
            parse_graph(render(goal)),
            delivery_input(goal),
            executors=executors(goal),
            operations=frozenset({**BUILTIN, **OPERATIONS}),
            nonce=goal.id,
        )
        return self.view(self.goals.insert(goal)["id"])

    def create_from(
        self, source: str, *, worker: CommandWorker | PatchWorker | AgentWorker, **given: Any
    ) -> dict[str, Any]:
        """A new goal with ``source``'s settings, except the worker and those ``given``.

        The way forward from a goal that cannot continue (FAILED because its patch
        did not apply, BLOCKED with no generation left): the same objective,
        project, criteria, checks and protection, with a fixed or another worker.
        ``given`` takes :meth:`create`'s keywords; a None one keeps ``source``'s
        setting. The new goal notes where it came from; ``source`` is left as it is.
        """
        old = self.goals.get(source)["goal"]
        before = self.view(source)
        settings: dict[str, Any] = {
            "objective": old.objective,
            "project": old.project,
            "criteria": list(old.criteria),
            "checks": dict(old.checks),
            "required": list(old.required),
            "protected": list(old.protected),
            "max_generations": old.max_generations,
            "python": old.python,
            "allow_fewer": list(old.allow_fewer),
            "exclude": list(old.exclude),
        }
        settings.update({key: value for key, value in given.items() if value is not None})
        created = self.create(worker=worker, **settings)
        self.goals.note(
            created["goal"],
            f"created from {source} ({before['run_status']}: {before['detail']})",
        )
        return self.view(created["goal"])

    async def start(
        self, goal_id: str, expected: int, *, authority: AuthorityPolicy | None = None
    ) -> dict[str, Any]:
        """Admit the goal's delivery and run it to its first stop."""
        row = self.goals.check_version(goal_id, expected)
        if row["state"] != "READY":
            raise error(
                ErrorCode.GOAL_ILLEGAL_TRANSITION,
                f"the goal is {row['state']}",
                path=goal_id,
                expected="a READY goal ('goal resume' continues one)",
            )
        goal = row["goal"]
        me = _operator()
        policy = authority or AuthorityPolicy(actors={me: ("maintainer",)}, approver=me)
        delivery = admit(
            parse_graph(render(goal)),
            delivery_input(goal),
            authority=policy,
            executors=executors(goal),
            operations=frozenset({**BUILTIN, **OPERATIONS}),
            nonce=goal.id,
        )
        self.goals.advance(goal_id, expected, state="STARTED", delivery=delivery.delivery_id)
        if goal.exclude:
            # Recorded before the seed, so custody leaves the goal's folders out too.
            self._custody().set_exclusions(
                delivery.delivery_id, DEFAULT_EXCLUDED | frozenset(goal.exclude)
            )
        try:
            await self.host.run(delivery, seed=goal.project, created_by=f"goal:{goal.id}")
        except ExecsysError as exc:
            # e.g. the project could not be copied: the goal must still explain itself.
            self.goals.note(goal_id, f"goal start failed: {exc.one_line()}")
            raise
        await self._after_run(delivery.delivery_id)
        return self.view(goal_id)

    async def _after_run(self, delivery: str) -> None:
        """A frozen source that changed invalidates its generation and evidence."""
        report = self.host.inspect(delivery)
        if report.status != "failed":
            return
        events = [json.loads(line) for line in self.host.journal_lines(delivery)[1:]]
        last_failure = next((e for e in reversed(events) if e["transition"] == "work-failed"), None)
        code = ((last_failure or {}).get("error") or {}).get("code")
        freeze = report.nodes.get(NodeId("SOURCE_FREEZE"))
        frozen = freeze is not None and freeze.state == "completed"
        if code == ErrorCode.CUSTODY_WRITE_UNDER_READ.value and frozen:
            await self.host.invalidate(
                delivery,
                "SOURCE_FREEZE",
                actor="codeclosure",
                reason="the frozen source changed after the freeze; its evidence is void",
            )

    async def resume(self, goal_id: str, expected: int, reason: str) -> dict[str, Any]:
        """Continue a blocked goal under explicit authority (a directive, never a guess)."""
        row = self.goals.check_version(goal_id, expected)
        view = self.view(goal_id)
        delivery = row["delivery"]
        if row["state"] != "STARTED" or delivery is None:
            raise error(
                ErrorCode.GOAL_ILLEGAL_TRANSITION,
                f"the goal is {row['state']}",
                path=goal_id,
                expected="a started goal",
            )
        status = view.get("delivery_status")
        if view["run_status"] != "BLOCKED":
            raise error(
                ErrorCode.GOAL_ILLEGAL_TRANSITION,
                f"the goal is {view['run_status']}, not BLOCKED",
                path=goal_id,
                expected="a blocked goal (answer questions with 'execsys input')",
            )
        self.goals.advance(goal_id, expected, state="STARTED")
        sweep()  # scratch copies of checks whose agents died with the old runner
        if status in {"stopped", "intervention", "running"}:
            await self.host.recover(delivery, "continue", reason=reason)
        else:
            # A failed phase (e.g. a transient backend error): retry it from the last
            # savepoint, which the journal records as an invalidation, not an erasure.
            savepoints = self.host.inspect(delivery).savepoints
            if not savepoints:
                raise error(
                    ErrorCode.DIRECTIVE_NOT_APPLICABLE, "no savepoint to retry from", path=goal_id
                )
            await self.host.recover(
                delivery,
                "restart-from-savepoint",
                reason=reason,
                savepoint=savepoints[-1].savepoint,
            )
        return self.view(goal_id)

    async def cancel(self, goal_id: str, expected: int, reason: str) -> dict[str, Any]:
        """Stop dispatch, interrupt active work, record CANCELLED (never CLOSED)."""
        row = self.goals.check_version(goal_id, expected)
        if row["state"] == "CANCELLED":
            raise error(ErrorCode.GOAL_CANCELLED, "the goal is already cancelled", path=goal_id)
        if row["delivery"] is not None:
            status = self.host.status(row["delivery"]).status.value
            if status == "completed":
                raise error(
                    ErrorCode.GOAL_ILLEGAL_TRANSITION,
                    "the goal is closed",
                    path=goal_id,
                    expected="a goal that has not closed",
                )
            if status not in {"failed", "cancelled", "retired"}:
                await self.host.cancel(row["delivery"], reason=reason)
            sweep(row["delivery"])
        self.goals.advance(goal_id, expected, state="CANCELLED")
        return self.view(goal_id)

    def export(
        self,
        goal_id: str,
        fmt: str = "patch",
        output: Path | None = None,
        *,
        keep_history: bool = False,
    ) -> dict[str, Any]:
        """The accepted change with its digests: a unified diff, or a git bundle at ``output``.

        Once the change is out, the goal's live workspace is released and,
        unless ``keep_history``, custody forgets every savepoint but the base
        and the accepted one (the rejected generations' trees, decision 0056);
        exporting again gives the same change.
        """
        row = self.goals.get(goal_id)
        facts = accepted(row, self.host)
        custody = self._custody()
        ends = self._ends(row["delivery"])
        with trees(custody, row["delivery"], facts, *ends) as (base, after):
            paths = changed(base, after)
            if fmt == "bundle":
                if output is None:
                    raise error(
                        ErrorCode.USAGE,
                        "a bundle is binary: name the file it goes to",
                        path="--format bundle",
                        expected="--output FILE",
                    )
                made = write_bundle(base, after, facts, Path(row["goal"].project), output)
                report = {**facts, "format": "bundle", "files": paths, **made}
            else:
                report = {**facts, "format": "patch", "files": paths}
                report["patch"] = unified_diff(base, after, paths)
        delivery = DeliveryId(row["delivery"])
        report["workspace_released"] = custody.release(delivery)
        report["savepoints_pruned"] = 0
        if not keep_history and _has_head(custody, delivery):
            # This machine's copy: a machine that only exported the goal holds the
            # two trees and has no head (the archive is pruned below).
            report["savepoints_pruned"] = custody.prune(delivery, (ends[0],)).savepoints
        archived = self.host.archived
        if archived is not None:
            # The shared archive (PostgreSQL) keeps the same two trees, whichever
            # machine exports: any machine may export or apply the goal afterwards.
            report["archive_savepoints_pruned"] = 0
            if not keep_history:
                # Under the delivery's lease, as retirement is: the archive's writes
                # are fenced, and no runner or directive writes the delivery meanwhile.
                self.host.leases.acquire(delivery, wait_s=30.0)
                try:
                    report["archive_savepoints_pruned"] = archived.prune(delivery, ends)
                finally:
                    self.host.leases.release(delivery)
        return report

    def record_export(
        self, goal_id: str, fmt: str, output: str | None, artifact: str, manifest: str
    ) -> str:
        """Note on the goal what was exported, where to and its digest; the note's text."""
        where = str(Path(output).resolve()) if output else "standard output"
        text = f"{EXPORTED}{fmt} {artifact} to {where} (manifest {manifest})"
        self.goals.note(goal_id, text)
        return text

    def apply(self, goal_id: str, target: str) -> dict[str, Any]:
        """Write the accepted change onto ``target``, a clean copy of the goal's base."""
        row = self.goals.get(goal_id)
        facts = accepted(row, self.host)
        ends = self._ends(row["delivery"])
        with trees(self._custody(), row["delivery"], facts, *ends) as (base, after):
            paths = apply_to(Path(target), base, after, facts, row["goal"].exclude)
        return {
            **facts,
            "to": str(Path(target).resolve()),
            "files": paths,
            "already_applied": not paths,
        }

    def _custody(self) -> FileCustody:
        return FileCustody(data_dir(self.config) / "custody")

    def _ends(self, delivery: str) -> tuple[SavepointId, SavepointId]:
        """The goal's base and accepted savepoints, in this machine's custody cache.

        On a store that archives custody (PostgreSQL), the archive names them and
        they are fetched if this machine never held the goal's delivery.
        """
        did = DeliveryId(delivery)
        archived = self.host.archived
        if archived is None:
            custody = self._custody()
            return custody.savepoints(did)[0].savepoint, custody.head(did)
        base, head = archived.savepoints(did)[0].savepoint, archived.head(did)
        for savepoint in (base, head):
            archived.fetch(did, savepoint)
        return base, head

    def view(self, goal_id: str) -> dict[str, Any]:
        """The goal's status document."""
        return goal_view(self.goals.get(goal_id), self.host)

    def audit(self, goal_id: str) -> dict[str, Any]:
        """The goal's audit document."""
        return audit(self.goals.get(goal_id), self.host)

    def list(self) -> list[dict[str, Any]]:
        """Every goal, with its run status (derived like ``goal status``'s)."""
        rows = self.goals.list()
        statuses = {row["goal"]: listed_status(row, self.host) for row in rows}
        return [{**row, "run_status": statuses[row["goal"]]} for row in rows]


def _has_head(custody: FileCustody, delivery: DeliveryId) -> bool:
    try:
        custody.head(delivery)
    except ExecsysError:
        return False
    return True
