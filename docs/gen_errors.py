"""Generate ``docs/errors.md``: every ``ErrorCode``, grouped, with its meaning and exit status.

Groups follow the ``# --- group ---`` comments of ``contracts/_errors.py``; the
meanings live here, one line each. A code without a meaning stops the script,
so adding a code means saying what it means.

Run: ``.venv/bin/python docs/gen_errors.py`` (``--check`` exits 1 if the file is stale).
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

from contracts import ErrorCode, exit_status

OUT = Path(__file__).with_name("errors.md")

MEANINGS: dict[str, str] = {
    # input files and usage
    "USAGE": "The command line is malformed (unknown option, missing argument).",
    "FILE_NOT_FOUND": "A named file does not exist, is a directory or cannot be read.",
    "FILE_TOO_LARGE": "A document exceeds the 4 MiB limit (the message gives its size).",
    "FILE_NOT_REGULAR": "A document named by path is a FIFO, socket or device, which could block "
    "forever; pass it on standard input with `-` instead.",
    "FILE_NOT_TEXT": "A document contains NUL bytes or is not UTF-8.",
    "FILE_EMPTY": "A document is empty or only whitespace.",
    "FILE_NOT_WRITABLE": "An output path is a directory, or its folder is missing or not writable.",
    "PARSE_ERROR": "A document is not valid YAML/JSON, or holds a value JSON cannot (NaN, "
    "non-string keys, tags, merge keys).",
    "DOCUMENT_TOO_DEEP": "A document nests objects/arrays deeper than 64 levels.",
    "DOCUMENT_NUMBER_OUT_OF_RANGE": "A document holds a number canonical JSON cannot represent "
    "exactly: an integer beyond +/-(2^53 - 1), or an infinite float (`Infinity`, `1e999`, "
    "`.inf`).",
    "DUPLICATE_KEY": "A mapping repeats a key (the later one would silently win).",
    "YAML_ALIAS_REFUSED": "A YAML document uses an anchor or alias (they allow expansion bombs).",
    # spec shape
    "SPEC_NOT_A_MAPPING": "The spec document is not a mapping at its top level.",
    "SPEC_UNKNOWN_KEY": "A key the spec does not define, at the top level or in a node.",
    "SPEC_MISSING_KEY": "A key the spec requires is absent.",
    "SPEC_INVALID_VALUE": "A value has the wrong type or is out of range.",
    "SPEC_UNKNOWN_VERSION": "`spec:` is not `execution-system/v1`.",
    "SPEC_UNKNOWN_NODE_KIND": "A node's `kind` is missing or not one of the six kinds.",
    "SPEC_INVALID_NODE_ID": "A node id does not match `[A-Za-z_][A-Za-z0-9_-]{0,63}`.",
    "SPEC_INVALID_REFERENCE": "An `inputs` value or `select` is not a well-formed reference.",
    # graph semantics
    "GRAPH_UNDECLARED_START": "`start` names no declared node.",
    "GRAPH_UNDECLARED_SUCCESSOR": "`next`, a route case, `on_failure` or `barrier` names no "
    "declared node.",
    "GRAPH_MISSING_SUCCESSOR": "A step or wait declares neither `next` nor `routes`.",
    "GRAPH_AMBIGUOUS_SUCCESSOR": "A node declares both `next` and `routes`.",
    "GRAPH_ROUTE_PORT_UNDECLARED": "`routes.port` is not an output port of the node.",
    "GRAPH_ROUTE_PORT_NOT_ENUM": "The route port is not a string enum (or, for a wait, not "
    "required by the result).",
    "GRAPH_ROUTE_NOT_COVERED": "Some enum value of the route port has no case.",
    "GRAPH_ROUTE_UNKNOWN_CASE": "A route case is not a value of the port's enum.",
    "GRAPH_UNDECLARED_BRANCH": "A parallel branch names no declared node.",
    "GRAPH_DUPLICATE_BRANCH": "A parallel lists the same branch twice.",
    "GRAPH_SELECT_INVALID": "`select` is not an array-of-branch-names port of a declared node, "
    "admits a non-branch, or can never name a required branch.",
    "GRAPH_REQUIRED_NOT_BRANCH": "`required` names a node that is not one of the branches.",
    "GRAPH_BARRIER_MISMATCH": "A parallel's barrier is not a barrier node, is shared, is "
    "entered from outside the region, or a branch never reaches it.",
    "GRAPH_BRANCH_ESCAPES": "A branch shares nodes with another branch, is entered from "
    "outside, or contains a wait/barrier node.",
    "GRAPH_NESTED_PARALLEL": "A branch contains another parallel node.",
    "GRAPH_UNBOUNDED_CYCLE": "A cycle passes through no node with `max_visits`.",
    "GRAPH_UNREACHABLE_NODE": "A node cannot be reached from `start`.",
    "GRAPH_NO_TERMINAL": "The graph has no terminal node.",
    "GRAPH_INVALID_FAILURE_TARGET": "An `on_failure` target is not acceptable (reserved; "
    "no admission rule raises it yet).",
    "GRAPH_RESERVED_NODE_ID": "A node uses a reserved id (`input`, `__start__`, `__end__`).",
    "GRAPH_WORKSPACE_PATHS_INVALID": "`paths` is given without `workspace: write`.",
    "GRAPH_UNKNOWN_OPERATION": "An operation node names an operation the Host does not register.",
    "DATAFLOW_UNKNOWN_NODE": "A reference reads from a node that is not declared.",
    "DATAFLOW_UNKNOWN_PORT": "A reference reads a port its node does not declare.",
    "DATAFLOW_UNKNOWN_INPUT": "`input.<field>` names a field the input schema does not declare.",
    "DATAFLOW_NOT_GUARANTEED": "A plain (non-`?`) read is not produced on every path to the "
    "reader (or the field/property is not required).",
    # schemas
    "SCHEMA_UNKNOWN_KEYWORD": "A JSON Schema keyword that Draft 2020-12 does not define "
    "(usually a misspelling).",
    "SCHEMA_UNSUPPORTED_KEYWORD": "A Draft 2020-12 keyword, dialect, remote `$ref` or `format` "
    "this product does not enforce.",
    "SCHEMA_INVALID": "A schema is malformed (bad keyword value, undeclared `$defs` target, "
    "`$ref` cycle that never descends).",
    "SCHEMA_PATTERN_UNSUPPORTED": "A `pattern` or `patternProperties` key is not a regular "
    "expression RE2 can compile (look-around, back-references, oversized repetition); patterns "
    "are matched in linear time.",
    # delivery admission
    "INPUT_INVALID": "The delivery input does not match the graph's input schema.",
    "AUTHORITY_INVALID": "The authority policy document is malformed.",
    "CONFIG_INVALID": "The runner config document is malformed.",
    "EXECUTOR_UNBOUND": "An action's executor has no binding in the runner config.",
    "STORE_URL_INVALID": "The `--store` URL is not a supported store URL.",
    "ENGINE_UNKNOWN": "The configured host engine is not known.",
    # host run time
    "HOST_CREATION_FAILED": "The Host could not be created for the delivery.",
    "DELIVERY_NOT_FOUND": "No delivery with that id exists in the store.",
    "DELIVERY_EXISTS": "A delivery with that id already exists.",
    "DELIVERY_NOT_RUNNABLE": "The delivery is in a state from which it cannot run.",
    "DELIVERY_RETIRED": "The delivery has been retired.",
    "LEASE_HELD": "Another host currently owns the delivery's thread.",
    "LEASE_FENCED": "This host's ownership of the thread was superseded.",
    "OUTPUT_SCHEMA_VIOLATION": "An executor's output does not match the port schema.",
    "OUTPUT_UNDECLARED_PORT": "An executor produced a port the node does not declare.",
    "OUTPUT_MISSING_PORT": "An executor did not produce a declared port.",
    "ROUTE_VALUE_UNDECLARED": "A route port's value has no case.",
    "SELECTION_UNDECLARED": "A selection names something that is not a branch.",
    "SELECTION_EMPTY": "A selection names no branch.",
    "SELECTION_DUPLICATE": "A selection names a branch twice.",
    "SELECTION_STALE": "A selection from an earlier round was offered in this round.",
    "SELECTION_MISSING_REQUIRED": "A selection omits a required branch.",
    "INPUT_UNAVAILABLE": "A read found no value in the current round.",
    "MAX_VISITS_EXCEEDED": "A node would run more often than its `max_visits`.",
    "NODE_FAILED": "A node failed with no `on_failure` successor.",
    "DELIVERY_FAILED": "`run`, `input`, `resolve` or `recover` drove a delivery that ended "
    "failed without a more specific code (e.g. it reached a terminal with outcome `failed`).",
    "REQUIRED_BRANCH_FAILED": "A required branch failed, failing its region.",
    "RETRIES_EXHAUSTED": "Every attempt allowed by `retry` failed.",
    "EXECUTOR_PROTOCOL_ERROR": "An executor's reply broke the executor protocol.",
    "EXECUTOR_TIMEOUT": "An executor did not reply before its deadline.",
    "EXECUTOR_ABRUPT_TERMINATION": "An executor process ended without a result.",
    "EXECUTOR_START_FAILED": "An executor process could not be started.",
    "EXECUTOR_IMPORT_FAILED": "A python executor could not be imported.",
    "EXECUTOR_RAISED": "A python executor raised an exception.",
    "OPERATION_FAILED": "A registered operation failed on its inputs.",
    "SIBLING_STOPPED": "A branch was stopped because the delivery ended elsewhere.",
    "STORE_ERROR": "The store failed to read or write.",
    "STORE_NOT_FOUND": "A reading command (`status`, `inspect`, `journal export/verify/audit`, "
    "`watch`) or a command acting on a stored delivery (`stop`, `recover`, `retire`, `input`, "
    "`resolve`, `goal` other than `create`) names a store that does not exist; only `run`, "
    "`submit`, `serve`, `web`, `demo`, `goal create` and `store migrate` create one.",
    "STORE_UNREADABLE": "The store path is a directory, not an SQLite file, truncated or "
    "corrupted; nothing was changed.",
    "STORE_READ_ONLY": "A command that writes was given a store it may not write (read-only "
    "file or folder); reading commands still work on it.",
    "STORE_UNREACHABLE": "The PostgreSQL server of the store URL cannot be reached (no server "
    "at that host and port, or the database does not exist).",
    "STORE_AUTH_FAILED": "The PostgreSQL server refused the store URL's user or password.",
    "STORE_FOREIGN": "The PostgreSQL database already holds tables of another application; "
    "execsys uses a database of its own and creates nothing in it.",
    "STORE_SCHEMA_NEWER": "The store was migrated by a newer execsys than this one; upgrade "
    "this runner before it reads or writes that store.",
    "STORE_NOT_MIGRATED": "A reading command was given a PostgreSQL database that holds no "
    "execsys schema yet (run `execsys store migrate`, or any writing command).",
    "SUBSTRATE_ERROR": "The execution substrate failed unexpectedly.",
    "INTERVENTION_REQUIRED": "The delivery needs an operator's directive to continue.",
    "ATTEMPT_INTERRUPTED": "An attempt's runner stopped before its result committed; a "
    "directive ended the attempt as history and started a new one.",
    "RECOVERY_UNCERTAIN": "A directive cannot confirm that an interrupted attempt's processes "
    "are gone (another host launched them, or they do not die); the delivery stays in "
    "intervention.",
    # suspensions, directives
    "CORRELATION_UNKNOWN": "No pending suspension has that correlation id.",
    "CORRELATION_STALE": "The correlation belongs to an earlier suspension.",
    "CORRELATION_USED": "The correlation has already been answered.",
    "SUSPENSION_KIND_MISMATCH": "The response is for another kind of suspension.",
    "WAIT_NOT_PENDING": "The named wait node is not waiting.",
    "WAIT_RESULT_INVALID": "The wait result does not match the wait's result schema.",
    "ACTOR_NOT_ADMITTED": "The actor is not in the delivery's authority policy.",
    "ROLE_NOT_ADMITTED": "The actor does not hold the role, or the role cannot resolve the wait.",
    "APPROVAL_DUPLICATE_ACTOR": "The same actor approved twice where distinct actors are needed.",
    "DIRECTIVE_NOT_APPLICABLE": "The recovery directive does not apply in the current state.",
    "SAVEPOINT_UNKNOWN": "The named savepoint does not exist.",
    "STATE_MISMATCH": "Checkpoint, journal and custody disagree.",
    "STOP_NOT_APPLICABLE": "The delivery cannot be stopped in its current state.",
    "STOP_REQUESTED": "An operator stopped the delivery; only a directive continues it.",
    "DELIVERY_CANCELLED": "An operator cancelled the delivery; each activation still open was "
    "ended with this code, by that operator.",
    "RETIRE_NOT_APPLICABLE": "The delivery is neither terminal nor stopped.",
    "RETIRE_AUTHORIZATION_CONFLICT": "The delivery was retired under another authorization.",
    # custody
    "CAPABILITY_BAD_SIGNATURE": "A workspace capability's signature does not verify.",
    "CAPABILITY_MALFORMED": "A workspace capability cannot be decoded.",
    "CAPABILITY_WRONG_DELIVERY": "The capability was issued for another delivery.",
    "CAPABILITY_WRONG_SITE": "The capability was issued for another execution site.",
    "CAPABILITY_WRONG_INVOCATION": "The capability was issued for another invocation.",
    "CAPABILITY_EXPIRED": "The capability is past its expiry.",
    "CAPABILITY_REPLAYED": "The capability was already used.",
    "CAPABILITY_STALE_BASE": "The workspace moved on since the capability was issued.",
    "CUSTODY_WRITE_UNDER_READ": "A read-only action changed the workspace.",
    "CUSTODY_PROTECTED_PATH": "A step changed a path its capability protects (e.g. the tests).",
    "CUSTODY_WRITE_OUTSIDE_PATHS": "A write touched a path outside the allowed prefixes.",
    "CUSTODY_UNATTRIBUTED_WRITE": "A workspace path changed before the turn's capability was "
    "issued: a write from outside the turn (e.g. a process left over from an earlier step); "
    "refused, never committed by a later step.",
    "CUSTODY_SYMLINK_ESCAPE": "A symlink points outside the workspace.",
    "CUSTODY_SPECIAL_FILE": "The workspace holds a device, socket or FIFO.",
    "CUSTODY_PATH_TRAVERSAL": "A path climbs out of the workspace.",
    "CUSTODY_ARTIFACT_MISMATCH": "An artifact does not match its recorded digest.",
    "CUSTODY_REJECTED": "Custody refused the preview.",
    "CUSTODY_RESTORE_UNCERTAIN": "A restore could not be verified; an intervention is needed.",
    "CUSTODY_SAVEPOINT_UNKNOWN": "Custody does not know the savepoint.",
    "CUSTODY_HEAD_MISMATCH": "Custody's head is not the one the caller expected.",
    "CUSTODY_SEED_INVALID": "The workspace seed is not acceptable.",
    "CUSTODY_KEY_INVALID": "The custody signing key is missing or malformed.",
    "CUSTODY_WORKSPACE_UNKNOWN": "Custody holds no workspace under that name.",
    # journal
    "JOURNAL_STALE_HEAD": "An append was based on an old journal head.",
    "JOURNAL_PRIOR_STATE_MISMATCH": "An event's prior node state is not the recorded one.",
    "JOURNAL_INVALID_TRANSITION": "An event makes a node-state transition the table forbids.",
    "JOURNAL_UNKNOWN_NODE": "An event names a node the graph does not declare.",
    "JOURNAL_DEPENDENCY_GAP": "An event comes before an event it depends on.",
    "JOURNAL_REQUEST_CONFLICT": "An event conflicts with the recorded request.",
    "JOURNAL_ATTEMPT_INVALID": "An event's attempt number is out of sequence.",
    "JOURNAL_RETRY_UNAUTHORIZED": "A retry is recorded without a retryable failure or policy.",
    "JOURNAL_MISSING_OUTPUT": "A completion is recorded without its outputs.",
    "JOURNAL_ACTOR_REQUIRED": "An event that needs an actor names none.",
    "JOURNAL_FORGED_ROLE": "An event claims a role the authority policy does not give.",
    "JOURNAL_AUTOMATION_CLAIMS_HUMAN": "An automated actor claims to be a human approver.",
    "JOURNAL_APPROVAL_INVALID": "A recorded approval does not satisfy the wait's authority.",
    "JOURNAL_UNVERIFIED_AUTHORITY": "An event relies on an authority that was not verified.",
    "JOURNAL_PARTIAL_INVALIDATION": "An invalidation leaves dependent results in place.",
    "JOURNAL_INVALIDATION_SOURCE": "An invalidation names an invalid source.",
    "JOURNAL_BAD_SUCCESSOR": "An event moves to a node that is not a declared successor.",
    "JOURNAL_UNKNOWN_FIELD": "A record has a field the format does not define.",
    "JOURNAL_MALFORMED_RECORD": "A record cannot be decoded.",
    "JOURNAL_NONCANONICAL": "A record is not in canonical JSON (RFC 8785).",
    "JOURNAL_DIGEST_MISMATCH": "A record's digest does not match its content.",
    "JOURNAL_CHAIN_BROKEN": "A record does not link to its predecessor's digest.",
    "JOURNAL_ORDINAL_GAP": "Ordinals skip or repeat.",
    "JOURNAL_DUPLICATE_EVENT": "The same event appears twice.",
    "JOURNAL_FOREIGN_RECORD": "A record belongs to another delivery.",
    "JOURNAL_MISSING_HEADER": "The journal does not start with its header.",
    "JOURNAL_EMPTY": "The journal has no records.",
    "JOURNAL_CHECKPOINT_MISMATCH": "The journal head and the checkpoint disagree.",
    "JOURNAL_ACTIVATION_INVALID": "An event's activation number is out of sequence.",
    # audit bundles and audits
    "BUNDLE_MALFORMED": "An audit bundle's layout is wrong (meta line, counts, record lines, "
    "trailer).",
    "BUNDLE_NONCANONICAL": "A bundle line is not in canonical JSON (RFC 8785).",
    "BUNDLE_DIGEST_MISMATCH": "A bundle's bytes do not match the digest in its trailer (a byte was "
    "changed).",
    "BUNDLE_UNSIGNED": "A trusted key was named but the bundle carries no signature.",
    "BUNDLE_SIGNATURE_INVALID": "A bundle's signature is malformed, by another key, or does not "
    "verify.",
    "KEY_INVALID": "A key file is not a PEM Ed25519 key of the kind needed.",
    "AUDIT_DELIVERY_INVALID": "A bundle's delivery document or policy is not a valid admitted "
    "delivery.",
    "AUDIT_HEADER_MISMATCH": "The journal header does not bind the delivery, graph, policy or node "
    "declarations the audit derives.",
    "AUDIT_UNDECLARED_EDGE": "A node ran over an edge of the wrong kind (a failure successor after "
    "a success, or the reverse).",
    "AUDIT_ROUTE_MISMATCH": "A successor ran that the route case of its predecessor's output does "
    "not name.",
    "AUDIT_BRANCH_UNSELECTED": "A parallel branch ran that its selection did not name.",
    "AUDIT_SELECTION_INVALID": "A parallel selection is empty, undeclared, omits a required "
    "branch, or differs from its select port.",
    "AUDIT_BARRIER_MISMATCH": "A barrier fired after a set of branches other than the selected "
    "one.",
    "AUDIT_MAX_VISITS_EXCEEDED": "A node was visited more often than its max_visits.",
    "AUDIT_AFTER_TERMINAL": "Work was recorded after a terminal ended the delivery.",
    "AUDIT_RECORD_MISSING": "A completion lacks a record its node declares, or a referenced record "
    "is absent from the bundle.",
    "AUDIT_RECORD_DIGEST_MISMATCH": "A record in the bundle does not hash to its digest.",
    "AUDIT_RECORD_SCHEMA_VIOLATION": "A recorded output or result does not validate against the "
    "node's admitted schema.",
    "AUDIT_APPROVAL_MISMATCH": "A wait's conduct or approval records disagree with the approvals "
    "its completion names.",
    "AUDIT_RETIREMENT_MISMATCH": "A retired delivery's retirement fact names another delivery "
    "or journal head.",
    # CodeClosure
    "GOAL_NOT_FOUND": "No goal with that id exists.",
    "GOAL_INVALID": "A goal document is malformed.",
    "GOAL_STALE_VERSION": "The goal changed since the version the caller read.",
    "GOAL_ILLEGAL_TRANSITION": "The goal cannot make that transition from its state.",
    "GOAL_NOT_ACCEPTED": "The goal has not been accepted.",
    "GOAL_MANIFEST_MISMATCH": "The change does not match the goal's manifest.",
    "GOAL_PROTECTED_PATH": "The change touches a protected path.",
    "GOAL_SOURCE_DRIFT": "The source moved since the goal was started.",
    "GOAL_CANCELLED": "The goal was cancelled.",
    "PATCH_DOES_NOT_APPLY": "A patch does not apply to the workspace.",
    "CHECK_CANNOT_START": "A check could not be started.",
    "CHECK_NOT_CANDIDATE": "A check would not test the candidate: it runs under execsys's own "
    "interpreter by default, or would import the project's packages from outside the project.",
    "GOAL_FAILED": "`goal start`/`resume` ended with the goal FAILED; the reason follows.",
    "GOAL_BLOCKED": "`goal start`/`resume` ended with the goal BLOCKED; the reason and the "
    "next safe action follow.",
    "GOAL_EXPORT_FAILED": "Writing the accepted change as a git bundle failed (the git "
    "command's message follows); nothing was written to the output.",
    "WORKER_EVENT_CONFLICT": "A worker event conflicts with one already recorded.",
    # HTTP API and console
    "AUTH_REQUIRED": "An HTTP request carries no bearer token or session (HTTP 401).",
    "AUTH_TOKEN_UNKNOWN": "A bearer token or session is not in the tokens file (HTTP 401).",
    "AUTH_FORBIDDEN": "The token's role may not do this, or not on this delivery (HTTP 403).",
    "CSRF_INVALID": "A console form was posted without its session's CSRF token (HTTP 403).",
    "TOKENS_INVALID": "The tokens file is malformed, or `web token add` got a bad role or scope.",
    "WEB_LISTEN_REFUSED": "`execsys web` would listen beyond loopback without `--tokens`, or "
    "`--listen` is not HOST:PORT.",
    "WEB_NOT_FOUND": "No HTTP route has this path (HTTP 404).",
    "WEB_METHOD_NOT_ALLOWED": "The HTTP route exists but not with this method (HTTP 405).",
    # last resort
    "INTERNAL": "An unexpected internal error (a bug); rerun with `EXECSYS_DEBUG=1`.",
}


def groups() -> list[tuple[str, list[ErrorCode]]]:
    """``(group title, codes)`` in declaration order, from the enum's section comments."""
    import contracts._errors as source

    found: list[tuple[str, list[ErrorCode]]] = []
    for line in inspect.getsource(source.ErrorCode).splitlines():
        header = re.match(r"\s*# --- (.+?) -+\s*$", line)
        member = re.match(r"\s*([A-Z][A-Z0-9_]*) = \"", line)
        if header:
            found.append((header.group(1), []))
        elif member and found:
            found[-1][1].append(ErrorCode[member.group(1)])
    listed = {code for _, codes in found for code in codes}
    missing = [code.value for code in ErrorCode if code not in listed]
    if missing:
        found.append(("other", [ErrorCode(v) for v in missing]))
    return found


def render() -> str:
    """The full text of ``docs/errors.md``."""
    unexplained = [code.value for code in ErrorCode if code.value not in MEANINGS]
    if unexplained:
        raise SystemExit("gen_errors: no meaning for " + ", ".join(unexplained))
    lines = [
        "# Error catalogue",
        "",
        "<!-- generated by docs/gen_errors.py from contracts/_errors.py; do not edit -->",
        "",
        "Every refusal carries one stable code (never renamed or reused), the path of",
        "what it refers to, and what was expected there. The CLI prints it as one line",
        "on stderr, `execsys: CODE at PATH: message (expected ...)`, and with `--json`",
        'also `{"error": {"code", "message", "path"}}` on stdout.',
        "",
        "Exit status: **2** for a malformed request, document or configuration (fix",
        "the input and retry), **1** for a well-formed request the system refused or",
        "could not carry out (`contracts.exit_status`). A command that drives",
        "deliveries and receives SIGINT or SIGTERM stops them at a safe boundary, prints",
        "what it would have printed and exits **130** or **143** (128 + the signal's",
        "number; decision 0136).",
        "",
    ]
    for title, codes in groups():
        lines += [f"## {title[0].upper()}{title[1:]}", "", "| code | exit | meaning |"]
        lines.append("|---|---|---|")
        for code in codes:
            lines.append(f"| `{code.value}` | {exit_status(code)} | {MEANINGS[code.value]} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    """Write ``docs/errors.md`` (or, with ``--check``, compare it)."""
    text = render()
    if "--check" in sys.argv[1:]:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        return 0 if current == text else 1
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
