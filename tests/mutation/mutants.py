"""The hand-written mutants of the rule modules, each with the tests that must kill it.

A mutant is one small, plausible bug: ``original`` must occur exactly once in
``file`` and is replaced by ``replacement``. ``tests`` are the test files that
guard the rule (a subset of the fast suite). ``equivalent`` is set only for a
mutant judged unable to change observable behaviour, and says why.
"""

from __future__ import annotations

from tests.mutation.mutant import Mutant

__all__ = ["MUTANTS", "Mutant"]


PATHS = ("tests/host/test_paths.py",)
COMMIT = ("tests/host/test_commit.py", "tests/host/test_failures.py")
WAITS = ("tests/host/test_suspensions.py",)
RULES = (
    "tests/journal/test_refusals.py",
    "tests/journal/test_fixtures.py",
    "tests/journal/test_state_machine.py",
)
CHAIN = ("tests/journal/test_verify.py", "tests/journal/test_fixtures.py")
CODEC = (
    "tests/journal/test_codec.py",
    "tests/journal/test_fixtures.py",
    "tests/journal/test_verify.py",
)
CUSTODY = ("tests/custody/test_custody_capability.py", "tests/custody/test_custody_validate.py")
ACCEPTANCE = ("tests/codeclosure/test_operations.py",)
FAILURES = ("tests/codeclosure/test_failures.py",)

SELECTION_PY = "host/_selection.py"
FLOW_PY = "host/_flow.py"
VALIDATE_PY = "host/_validate.py"
ACTION_PY = "host/_action.py"
SERVICE_PY = "host/_service.py"
RESUMES_PY = "host/_resumes.py"
WAIT_PY = "host/_wait.py"
RULES_PY = "host/journal/_rules.py"
CHAIN_PY = "host/journal/_chain.py"
CODEC_PY = "host/journal/_codec.py"
CAPABILITY_PY = "execution_system/custody/_capability.py"
CUSTODY_PY = "execution_system/custody/_custody.py"
TREE_PY = "execution_system/custody/_tree.py"
OPERATIONS_PY = "execution_system/codeclosure/_operations.py"
FAILURES_PY = "execution_system/codeclosure/_failures.py"

MUTANTS: tuple[Mutant, ...] = (
    # --- selection ------------------------------------------------------------------
    Mutant(
        "selection-planner-order",
        "selection returned in the planner's order",
        SELECTION_PY,
        "    return [b for b in node.branches if b in chosen]",
        "    return list(value)",
        PATHS,
    ),
    Mutant(
        "selection-empty-allowed",
        "an empty selection is accepted",
        SELECTION_PY,
        "    if not value:\n",
        "    if False:\n",
        PATHS,
    ),
    Mutant(
        "selection-duplicate-allowed",
        "a branch named twice is accepted",
        SELECTION_PY,
        "    if len(set(value)) != len(value):",
        "    if False:",
        PATHS,
    ),
    Mutant(
        "selection-required-ignored",
        "a selection may omit a required branch",
        SELECTION_PY,
        "    missing = [r for r in node.required if r not in value]",
        "    missing: list[str] = []",
        PATHS,
    ),
    Mutant(
        "selection-undeclared-allowed",
        "a selection may name an undeclared branch",
        SELECTION_PY,
        "    unknown = [v for v in value if v not in node.branches]",
        "    unknown: list[str] = []",
        PATHS,
    ),
    Mutant(
        "selection-absent-select",
        "no select runs only the first branch",
        SELECTION_PY,
        "    if node.select is None:\n        return list(node.branches)",
        "    if node.select is None:\n        return list(node.branches)[:1]",
        PATHS,
    ),
    # --- barrier and rounds -----------------------------------------------------------
    Mutant(
        "barrier-old-round-mark",
        "a barrier counts a branch's mark from an earlier round",
        FLOW_PY,
        'marks.get(f"{parallel}/{b}") == round_no]',
        'marks.get(f"{parallel}/{b}") is not None]',
        PATHS,
    ),
    Mutant(
        "barrier-first-arrival",
        "a barrier fires on the first arrival",
        FLOW_PY,
        '    if len(arrived) != len(info["selected"]):',
        "    if not arrived:",
        PATHS,
    ),
    Mutant(
        "barrier-fires-twice",
        "a barrier that fired this round may fire again",
        FLOW_PY,
        '    if not info or info.get("fired"):',
        "    if not info:",
        PATHS,
    ),
    Mutant(
        "round-keeps-old-outputs",
        "a new parallel round keeps the branches' earlier outputs",
        FLOW_PY,
        '                writer.put("outputs", member, None)',
        "                pass",
        PATHS,
    ),
    # --- validation -------------------------------------------------------------------
    Mutant(
        "validate-undeclared-port",
        "an undeclared output port is accepted",
        VALIDATE_PY,
        "        if port not in declared:",
        "        if False:",
        COMMIT,
    ),
    Mutant(
        "validate-schema-ignored",
        "a port value is not checked against its schema",
        VALIDATE_PY,
        "        if problem is not None:\n            where, message = problem",
        "        if False:\n            where, message = problem",
        COMMIT,
    ),
    Mutant(
        "validate-route-keyerror",
        "a route value outside the cases becomes a raw KeyError",
        VALIDATE_PY,
        "    if not isinstance(value, str) or value not in routes.cases:",
        "    if not isinstance(value, str):",
        PATHS,
    ),
    # --- commit order -----------------------------------------------------------------
    Mutant(
        "commit-advance-failure-ignored",
        "an advance failing after an accepted validation is ignored",
        ACTION_PY,
        "    if advanced is not None:",
        "    if False:",
        COMMIT,
    ),
    Mutant(
        "commit-rejection-no-restore",
        "a custody rejection fails the node without restoring",
        ACTION_PY,
        "    if not verdict.accepted or verdict.savepoint is None:\n"
        "        if await _restore_or_intervene(writer, base):",
        "    if not verdict.accepted or verdict.savepoint is None:\n        if True:",
        COMMIT,
    ),
    Mutant(
        "commit-invalid-output-no-restore",
        "an invalid output fails the node without restoring",
        ACTION_PY,
        "        if await _restore_or_intervene(writer, base):\n"
        "            fail_node(writer, site, exc.code, exc.message, node.on_failure)",
        "        if True:\n"
        "            fail_node(writer, site, exc.code, exc.message, node.on_failure)",
        COMMIT,
    ),
    Mutant(
        "commit-executor-failure-no-restore",
        "an executor failure does not restore the base savepoint",
        ACTION_PY,
        "    if isinstance(result, Failed):\n"
        "        if not await _restore_or_intervene(writer, base):\n"
        "            return\n",
        "    if isinstance(result, Failed):\n",
        COMMIT,
    ),
    Mutant(
        "commit-uncertain-restore-trusted",
        "an unconfirmed restore is treated as confirmed",
        ACTION_PY,
        "    if not restored.confirmed:",
        "    if False:",
        COMMIT,
    ),
    Mutant(
        "commit-unknown-outcome-as-failure",
        "an unknown executor outcome is routed as an ordinary failure",
        ACTION_PY,
        "        if result.unknown_outcome:",
        "        if False:",
        COMMIT,
    ),
    Mutant(
        "commit-savepoint-not-recorded",
        "the accepted savepoint is not recorded with the checkpoint",
        ACTION_PY,
        '    writer.put("savepoint", "head", verdict.savepoint)',
        "    pass",
        COMMIT,
    ),
    Mutant(
        "retry-one-too-many",
        "a retry policy allows one attempt more than max_attempts",
        "host/_retry.py",
        "attempt < policy.max_attempts",
        "attempt <= policy.max_attempts",
        COMMIT,
    ),
    # --- action-input -----------------------------------------------------------------
    Mutant(
        "input-answer-on-halted-delivery",
        "an answer is accepted on a delivery that cannot run",
        SERVICE_PY,
        '        if known != "answered":\n            self.runnable(did)',
        "        pass",
        WAITS,
    ),
    Mutant(
        "input-used-correlation",
        "an answered correlation is reported as unknown, not used",
        RESUMES_PY,
        '    if known == "answered":',
        "    if False:",
        WAITS,
    ),
    Mutant(
        "input-kind-mismatch",
        "an answer to a workflow wait is not told apart from an unknown correlation",
        RESUMES_PY,
        '    if values.get("waits") and not suspensions:',
        "    if False:",
        WAITS,
    ),
    Mutant(
        "input-new-turn-number",
        "a continued invocation restarts at turn 1",
        ACTION_PY,
        '        turn = int(suspension["turn"]) + 1',
        "        turn = 1",
        WAITS,
    ),
    # --- waits ------------------------------------------------------------------------
    Mutant(
        "wait-min-count-one",
        "a min_count wait completes on its first approval",
        WAIT_PY,
        "    if len(approvals) < node.authority.min_count:",
        "    if len(approvals) < 1:",
        WAITS,
    ),
    Mutant(
        "wait-same-actor-twice",
        "one actor may approve a distinct_actors wait twice",
        RESUMES_PY,
        "    if spec.authority.distinct_actors and any(",
        "    if False and any(",
        WAITS,
    ),
    Mutant(
        "wait-approvals-disagree",
        "approvals of one wait may carry different results",
        RESUMES_PY,
        '    if pending.get("approvals") and pending.get("result") != result:',
        "    if False:",
        WAITS,
    ),
    Mutant(
        "wait-role-of-node-ignored",
        "any role the policy gives may resolve a wait that names other roles",
        RESUMES_PY,
        "    if role not in spec.authority.roles:",
        "    if False:",
        WAITS,
    ),
    Mutant(
        "wait-result-schema-ignored",
        "a wait result is not checked against the wait's schema",
        RESUMES_PY,
        "    problem = validation_problem(spec.result, result)\n    if problem is not None:",
        "    problem = validation_problem(spec.result, result)\n    if False:",
        WAITS,
    ),
    # --- journal rules ----------------------------------------------------------------
    Mutant(
        "rules-outputs-overlap",
        "a completion referencing one of two declared artifacts is accepted",
        RULES_PY,
        "        if not rule.outputs <= given:",
        "        if not rule.outputs & given:",
        RULES,
    ),
    Mutant(
        "rules-batch-index",
        "batch indexes are not checked to follow each other",
        RULES_PY,
        '            or batch["index"] != len(open_batch.keys) + 1\n',
        "",
        RULES,
    ),
    Mutant(
        "rules-prior-state",
        "an event's stated prior state is not compared with the current one",
        RULES_PY,
        '    if STATE_OF[event["prior_state"]] is not current:',
        "    if False:",
        RULES,
    ),
    Mutant(
        "rules-result-state",
        "an event's result state is not compared with the transition table",
        RULES_PY,
        '    if STATE_OF[event["result_state"]] is not result:',
        "    if False:",
        RULES,
    ),
    Mutant(
        "rules-dependency-not-upstream",
        "a predecessor that is not upstream is accepted",
        RULES_PY,
        "        if pred in seen or node not in rule.upstream:",
        "        if pred in seen:",
        RULES,
    ),
    Mutant(
        "rules-distinct-approvers",
        "one actor approving twice is accepted",
        RULES_PY,
        "    if need.distinct_actors and len(set(actors)) != len(actors):",
        "    if False:",
        RULES,
    ),
    Mutant(
        "rules-min-count",
        "one approval fewer than min_count is accepted",
        RULES_PY,
        "    if len(actors) < need.min_count:",
        "    if len(actors) < need.min_count - 1:",
        RULES,
    ),
    Mutant(
        "rules-activation-skip",
        "an activation number may skip ahead",
        RULES_PY,
        "    if number != latest + 1:",
        "    if False:",
        RULES,
    ),
    Mutant(
        "rules-conduct-record",
        "a human completion without its conduct record is accepted",
        RULES_PY,
        '    if rule.needs_conduct and not any(ref["kind"] == CONDUCT_KIND for ref in refs):',
        "    if False:",
        RULES,
    ),
    Mutant(
        "rules-attempt-sequence",
        "an attempt may skip a sequence number",
        RULES_PY,
        '        if attempt["sequence"] != len(attempts) + 1 or any(',
        '        if attempt["sequence"] < len(attempts) + 1 or any(',
        RULES,
    ),
    # --- journal chain ----------------------------------------------------------------
    Mutant(
        "chain-foreign-record",
        "an event of another execution is accepted",
        CHAIN_PY,
        "        if execution != self._execution:",
        "        if False:",
        CHAIN,
    ),
    Mutant(
        "chain-prior-unchecked",
        "an event's prior digest is not compared with the previous record",
        CHAIN_PY,
        "        if prior != self._head:",
        "        if False:",
        CHAIN,
    ),
    Mutant(
        "chain-duplicate-as-gap",
        "a repeated event is reported as an ordinal gap",
        CHAIN_PY,
        "            if digest in self._seen:",
        "            if False:",
        CHAIN,
    ),
    # --- journal codec ----------------------------------------------------------------
    Mutant(
        "codec-noncanonical-accepted",
        "a line that is not canonical JSON is accepted",
        CODEC_PY,
        "    if dumps_canonical(members) != raw:",
        "    if False:",
        CODEC,
    ),
    Mutant(
        "codec-digest-unchecked",
        "a line's digest is not checked",
        CODEC_PY,
        "    if digest != stated:",
        "    if False:",
        CODEC,
    ),
    Mutant(
        "codec-unknown-member",
        "an unknown member is reported as malformed, not unknown",
        CODEC_PY,
        "        if unknown:\n",
        "        if False:\n",
        CODEC,
    ),
    # --- custody capabilities and observed state ----------------------------------------
    Mutant(
        "capability-signature-unchecked",
        "a capability's signature is not checked",
        CAPABILITY_PY,
        "    if not hmac.compare_digest(key.sign(payload), signature):",
        "    if False:",
        CUSTODY,
    ),
    Mutant(
        "capability-attempt-unchecked",
        "a capability may be used by another attempt",
        CAPABILITY_PY,
        '    for name in ("node", "activation", "attempt"):',
        '    for name in ("node", "activation"):',
        CUSTODY,
    ),
    Mutant(
        "capability-invocation-unchecked",
        "a capability may be used by another invocation",
        CAPABILITY_PY,
        "    if not hmac.compare_digest(granted.invocation.encode(), site.invocation.encode()):",
        "    if False:",
        CUSTODY,
    ),
    Mutant(
        "capability-expiry-boundary",
        "a capability is still valid at its expiry instant",
        CUSTODY_PY,
        "            if self._clock() >= claims.expires_at:",
        "            if self._clock() > claims.expires_at:",
        CUSTODY,
    ),
    Mutant(
        "capability-replay",
        "a capability may be used for two accepted commits",
        CUSTODY_PY,
        "                if claims.nonce in self._state.used_nonces(delivery):",
        "                if False:",
        CUSTODY,
    ),
    Mutant(
        "capability-stale-base",
        "a capability issued on an older head is accepted",
        CUSTODY_PY,
        "                if claims.base_savepoint != head:",
        "                if False:",
        CUSTODY,
    ),
    Mutant(
        "custody-protected-ignored",
        "changes under a protected subtree are accepted",
        CAPABILITY_PY,
        "    guarded = [path for path in changed if protected_by(path, claims.protected)]",
        "    guarded: list[str] = []",
        CUSTODY,
    ),
    Mutant(
        "custody-read-allows-writes",
        "a read capability allows changes",
        CAPABILITY_PY,
        '    if claims.mode == "read":',
        "    if False:",
        CUSTODY,
    ),
    Mutant(
        "custody-prefix-not-a-component",
        "a write prefix matches part of a path component",
        TREE_PY,
        'path.startswith(prefix + "/")',
        "path.startswith(prefix)",
        CUSTODY,
    ),
    # --- CodeClosure acceptance -------------------------------------------------------
    Mutant(
        "accept-spec-unbound",
        "evidence for another check specification is eligible",
        OPERATIONS_PY,
        'if item.get("frozen") != frozen or item.get("spec") != specs.get(name)',
        'if item.get("frozen") != frozen',
        ACCEPTANCE,
    ),
    Mutant(
        "accept-without-evidence",
        "no evidence at all is accepted",
        OPERATIONS_PY,
        "    if ineligible or not evidence:",
        "    if ineligible:",
        ACCEPTANCE,
    ),
    Mutant(
        "accept-generation-boundary",
        "the last generation is still repairable",
        OPERATIONS_PY,
        '        if generation < int(inputs["max_generations"]):',
        '        if generation <= int(inputs["max_generations"]):',
        ACCEPTANCE,
    ),
    Mutant(
        "accept-optional-as-required",
        "a failing optional check is treated as a required one",
        OPERATIONS_PY,
        "    failing_required = [name for name in failing if name in required]",
        "    failing_required = failing",
        ACCEPTANCE,
    ),
    Mutant(
        "closeout-other-digest",
        "closeout consumes an ACCEPT of another digest",
        OPERATIONS_PY,
        '    if inputs["accepted"] != inputs["frozen"]:',
        "    if False:",
        ACCEPTANCE,
    ),
    Mutant(
        "reevaluate-truthy",
        "re-evaluation accepts any truthy answer, not only true",
        OPERATIONS_PY,
        '    decision = "ACCEPT" if inputs["accept"] is True else "REJECT_BLOCKED"',
        '    decision = "ACCEPT" if inputs["accept"] else "REJECT_BLOCKED"',
        ACCEPTANCE,
    ),
    # --- failure classes --------------------------------------------------------------
    Mutant(
        "failure-class-entry",
        "one code is mapped to another failure class",
        FAILURES_PY,
        "    ErrorCode.MAX_VISITS_EXCEEDED: FailureClass.ENGINE_ERROR,",
        "    ErrorCode.MAX_VISITS_EXCEEDED: FailureClass.TRANSIENT_BACKEND,",
        FAILURES,
    ),
    Mutant(
        "failure-status-entry",
        "abrupt termination reads as FAILED instead of BLOCKED",
        FAILURES_PY,
        "    FailureClass.ABRUPT_TERMINATION: RunStatus.BLOCKED,",
        "    FailureClass.ABRUPT_TERMINATION: RunStatus.FAILED,",
        FAILURES,
    ),
    Mutant(
        "failure-default-class",
        "a catalogued code outside the table is an unknown outcome",
        FAILURES_PY,
        "        return CLASS_OF.get(ErrorCode(code), FailureClass.ENGINE_ERROR)",
        "        return CLASS_OF.get(ErrorCode(code), FailureClass.UNKNOWN_OUTCOME)",
        FAILURES,
    ),
)

# The audit's fast lane and strict schema check (kept apart for size).
from tests.mutation.audit_mutants import AUDIT_MUTANTS  # noqa: E402

MUTANTS = MUTANTS + AUDIT_MUTANTS
