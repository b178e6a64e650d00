"""Audit a delivery from what an export carries: chain, append rules and the admitted graph.

:func:`audit_bundle` checks a bundle (``parse_bundle``): its digest and
signature, that the journal header binds the delivery, graph and policy found
in the bundle, then every event: the chain (as ``verify_lines``), the append
rules (as replay: the node state table, dependencies on declared edges,
approvals under the policy, invalidation closure), and the graph rules
(``_audit_graph``). :func:`audit_journal` does the same for a plain export
given the graph and policy separately. Nothing is read from a store.

The first integrity or append-rule violation ends the audit (the replay state
after it would be a guess); graph-rule violations are collected and, with
``all_violations``, the audit goes on after them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import ValidationError

from contracts._canonical import canonical_bytes
from contracts._delivery import AdmittedDelivery, AuthorityPolicy, graph_digest
from contracts._errors import ErrorCode, ExecsysError, error
from contracts._gc import collector_paused
from contracts._ids import Digest
from contracts._journal import JournalEvent, JournalHeader, NodeDecl
from contracts._spec import ControlGraph, WaitNode
from host.journal._audit_graph import GraphRules
from host.journal._audit_lane import AuditLane
from host.journal._bundle import Bundle, note_references, parse_bundle, referenced_digests
from host.journal._chain import ChainCheck
from host.journal._codec import (
    DIGEST_KEY,
    at,
    decode_line,
    dumps_canonical,
    loads_json,
    ordinal_of,
    parse_line,
    record_digest,
)
from host.journal._event_check import EventCheck
from host.journal._fields import verify_policy
from host.journal._header import node_decls
from host.journal._rules import check_event
from host.journal._signing import check_signature, fingerprint
from host.journal._state import ReplayState, authority_digest
from host.journal._verify import event_members

_VALIDATE_EVENT = JournalEvent.__pydantic_validator__.validate_json
_HOST_ACTOR = "host"
LANE = True
"""Whether the fast lane (``_audit_lane``) may accept events; the generic path decides the rest."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One rule the delivery's record breaks."""

    code: ErrorCode
    """The stable code."""
    ordinal: int | None
    """The event ordinal (0: the header; None: the bundle itself)."""
    message: str
    """What is wrong, in one sentence."""

    def to_json(self) -> dict[str, Any]:
        """``{"code", "ordinal", "message"}``."""
        return {"code": self.code.value, "ordinal": self.ordinal, "message": self.message}


@dataclass(slots=True)
class AuditReport:
    """What an audit found, and what the journal says happened."""

    delivery: str | None = None
    """The delivery (execution) id the header names."""
    events: int = 0
    """Events read."""
    head: Digest | None = None
    """Digest of the last event read."""
    records: str = "none"
    """``included`` (records checked), ``digests`` (references only) or ``none``."""
    signer: str | None = None
    """Fingerprint of the key that signed the bundle; None when unsigned."""
    trusted: bool = False
    """Whether the signer is the key the auditor named."""
    violations: list[Violation] = field(default_factory=list)
    """Every violation found (the first one only, unless all were asked for)."""
    path: list[str] = field(default_factory=list)
    """Activations in the order they ended: ``node#k`` (``node#k failed`` for a failure)."""
    waits: list[dict[str, Any]] = field(default_factory=list)
    """Each wait resolution: node, activation, ordinal and who approved under which role."""
    directives: list[dict[str, Any]] = field(default_factory=list)
    """Every event asked for by someone other than the Host, outside wait resolutions."""
    retirement: dict[str, Any] | None = None
    """The retirement fact a retired delivery's bundle carries."""

    @property
    def ok(self) -> bool:
        """Whether no violation was found."""
        return not self.violations

    def to_json(self) -> dict[str, Any]:
        """The ``journal audit --json`` document."""
        first = self.violations[0].to_json() if self.violations else None
        return {
            "ok": self.ok,
            "delivery": self.delivery,
            "events": self.events,
            "head": self.head,
            "records": self.records,
            "signature": None
            if self.signer is None
            else {
                "key": self.signer,
                "trusted": self.trusted,
            },
            "code": first["code"] if first else None,
            "ordinal": first["ordinal"] if first else None,
            "violations": [v.to_json() for v in self.violations],
            "path": self.path,
            "waits": self.waits,
            "directives": self.directives,
            "retirement": self.retirement,
        }

    def to_text(self) -> str:
        """A short report a person can read."""
        verdict = "clean" if self.ok else f"{len(self.violations)} violation(s)"
        lines = [
            f"delivery {self.delivery}: {self.events} events, head {self.head}",
            f"audit: {verdict}; records {self.records}; "
            + (
                f"signed by {self.signer} ({'trusted key' if self.trusted else 'key not checked'})"
                if self.signer
                else "unsigned"
            ),
            "path: " + (" -> ".join(self.path) if self.path else "(nothing ran)"),
        ]
        for wait in self.waits:
            who = ", ".join(f"{a['actor']} as {a['role']}" for a in wait["approvals"])
            lines.append(f"wait {wait['node']}#{wait['activation']}: resolved by {who}")
        for item in self.directives:
            lines.append(
                f"directive at ordinal {item['ordinal']}: {item['transition']} of "
                f"{item['node']}#{item['activation']} by {item['actor']}"
                + (f" ({item['rationale']})" if item["rationale"] else "")
            )
        if self.retirement is not None:
            lines.append(
                f"retired by {self.retirement.get('actor')} under authorization "
                f"{self.retirement.get('authorization')}"
            )
        for violation in self.violations:
            where = "" if violation.ordinal is None else f" at ordinal {violation.ordinal}"
            lines.append(f"violation {violation.code.value}{where}: {violation.message}")
        return "\n".join(lines)


def _violation(exc: ExecsysError) -> Violation:
    return Violation(exc.code, ordinal_of(exc), exc.one_line().split(": ", 1)[-1])


def audit_bundle(
    data: bytes, *, key: Ed25519PublicKey | None = None, all_violations: bool = False
) -> AuditReport:
    """Audit a bundle's bytes; never raises for bad data (the report names the violations)."""
    report = AuditReport()
    try:
        bundle = parse_bundle(data)
        signer = check_signature(bundle.signature, bundle.digest, key)
    except ExecsysError as exc:
        report.violations.append(Violation(exc.code, None, exc.message))
        return report
    if signer is not None:
        report.signer, report.trusted = fingerprint(signer), key is not None
    try:
        delivery = AdmittedDelivery.model_validate_json(canonical_bytes(bundle.delivery))
        policy = AuthorityPolicy.model_validate_json(canonical_bytes(bundle.policy))
    except (ValidationError, TypeError, ValueError) as exc:
        report.violations.append(
            Violation(ErrorCode.AUDIT_DELIVERY_INVALID, None, str(exc).splitlines()[0][:300])
        )
        return report
    if policy != delivery.authority:
        report.violations.append(
            Violation(
                ErrorCode.AUDIT_HEADER_MISMATCH,
                None,
                "the bundle's policy is not the one the delivery was admitted with",
            )
        )
        return report
    # The replay state grows by a few acyclic containers per event: collections
    # would only re-scan it (a fifth of a large audit's time without the pause).
    with collector_paused():
        _audit(
            report,
            bundle.journal,
            delivery.graph,
            policy,
            delivery.delivery_id,
            _loader(bundle),
            bundle,
            all_violations,
        )
    report.retirement = bundle.retirement
    if bundle.retirement is not None and report.ok:
        _check_retirement(report, bundle.retirement)
    return report


def _check_retirement(report: AuditReport, fact: dict[str, Any]) -> None:
    """A retirement fact names this delivery and the journal as it was when retired."""
    journal = fact.get("journal")
    stated = journal if isinstance(journal, dict) else {}
    if (
        fact.get("delivery") != report.delivery
        or stated.get("head") != report.head
        or stated.get("events") != report.events
    ):
        report.violations.append(
            Violation(
                ErrorCode.AUDIT_RETIREMENT_MISMATCH,
                None,
                "the retirement fact names another delivery or another journal head",
            )
        )


def audit_journal(
    lines: list[bytes],
    graph: ControlGraph,
    policy: AuthorityPolicy,
    *,
    all_violations: bool = False,
) -> AuditReport:
    """Audit a plain export against a graph and policy given separately (no records).

    The header's graph and policy digests must be those of ``graph`` and
    ``policy``; its execution id cannot be re-derived without the whole
    admitted delivery, so it is reported, not checked.
    """
    report = AuditReport()
    with collector_paused():
        _audit(report, lines, graph, policy, None, None, None, all_violations)
    return report


def _loader(bundle: Bundle) -> Callable[[str, int], Any] | None:
    records = bundle.records
    if records is None:
        return None
    parsed: dict[str, Any] = {}

    def load(digest: str, where: int) -> Any:
        found = parsed.get(digest)
        if found is not None or digest in parsed:
            return found
        body = records.get(digest)
        if body is None:
            raise error(
                ErrorCode.AUDIT_RECORD_MISSING,
                f"record {digest} is not in the bundle",
                path=at(where),
            )
        if "sha256:" + hashlib.sha256(body).hexdigest() != digest:
            raise error(
                ErrorCode.AUDIT_RECORD_DIGEST_MISMATCH,
                f"record {digest} does not hash to its digest",
                path=at(where),
            )
        value = loads_json(body)
        parsed[digest] = value
        return value

    return load


def _by_id(decl: NodeDecl) -> str:
    return decl.id


def _header_checks(
    header: JournalHeader, graph: ControlGraph, policy: AuthorityPolicy, delivery: str | None
) -> None:
    checks = [
        (delivery is None or header.execution == delivery, "execution", delivery),
        (header.graph == graph_digest(graph), "graph digest", graph_digest(graph)),
        (header.authority == authority_digest(policy), "policy digest", authority_digest(policy)),
        (header.start == graph.start, "start node", graph.start),
        (
            sorted(header.nodes, key=_by_id) == sorted(node_decls(graph), key=_by_id),
            "node declarations",
            "those of the admitted graph",
        ),
    ]
    for ok, what, expected in checks:
        if not ok:
            raise error(
                ErrorCode.AUDIT_HEADER_MISMATCH,
                f"the header's {what} is not the admitted one",
                path=at(0),
                expected=str(expected),
            )
    verify_policy(header, policy)


def _audit(
    report: AuditReport,
    lines: list[bytes],
    graph: ControlGraph,
    policy: AuthorityPolicy,
    delivery: str | None,
    load: Callable[[str, int], Any] | None,
    bundle: Bundle | None,
    all_violations: bool,
) -> None:
    report.records = "none" if bundle is None else ("digests" if load is None else "included")
    try:
        if not lines:
            raise error(ErrorCode.JOURNAL_EMPTY, "the journal has no records", path=at(0))
        parse_line(lines[0], 0)
        header = decode_line(lines[0], 0)
        if not isinstance(header, JournalHeader):
            raise error(
                ErrorCode.JOURNAL_MISSING_HEADER, "first record is not a header", path=at(0)
            )
        report.delivery = header.execution
        _header_checks(header, graph, policy, delivery)
    except ExecsysError as exc:
        report.violations.append(_violation(exc))
        return
    head = record_digest(header)
    state = ReplayState(header, head, policy)
    chain = ChainCheck(header.execution, head)
    rules = GraphRules(graph, load)
    waits = {nid for nid, node in graph.nodes.items() if isinstance(node, WaitNode)}
    # The record listing is checked first (below, as if before any event), but
    # from the fields the event pass parses anyway: ``noted`` lines' references.
    references: dict[str, None] = {}
    noted = _events(report, lines, state, chain, rules, waits, references, all_violations)
    if bundle is not None:
        try:
            _listed_digests(bundle, referenced_digests(lines[noted + 1 :], references))
        except ExecsysError as exc:
            report.events, report.head = 0, None
            for found in (report.violations, report.path, report.waits, report.directives):
                found.clear()
            report.violations.append(_violation(exc))


def _events(
    report: AuditReport,
    lines: list[bytes],
    state: ReplayState,
    chain: ChainCheck,
    rules: GraphRules,
    waits: set[str],
    references: dict[str, None],
    all_violations: bool,
) -> int:
    """Check every event; return how many lines' references went into ``references``."""
    check = EventCheck()
    lane = AuditLane(rules.graph, state, chain, rules, references, report) if LANE else None
    noted = 0
    position, count = 1, len(lines)
    while position < count:
        if lane is not None:
            stop = lane.run(lines, position)
            if stop > position:
                noted = stop - 1
            if stop == count:
                break
            lane.flush()
            position = stop
        line = lines[position]
        try:
            members, digest = event_members(line, position)
            del members[DIGEST_KEY]
            chain.event(members["execution"], members["ordinal"], members["prior"], digest)
            if not check.valid(members, chained=True):
                _validate(members, position)
            note_references(references, members)
            noted = position
            check_event(state, members)
        except ExecsysError as exc:
            report.violations.append(_violation(exc))
            return noted
        try:
            rules.check(state, members)
        except ExecsysError as exc:
            report.violations.append(_violation(exc))
            if not all_violations:
                return noted
        try:
            state.apply(members, digest)  # closing an invalidation batch checks its closure
        except ExecsysError as exc:
            report.violations.append(_violation(exc))
            return noted
        rules.applied(members)
        report.events, report.head = position, digest
        _summarise(report, members, waits)
        if lane is not None:
            lane.resync(members["request"])
        position += 1
    if lane is not None:
        lane.flush(final=True)
    try:
        state.finish()
    except ExecsysError as exc:
        report.violations.append(_violation(exc))
    return noted


def _validate(members: dict[str, Any], position: int) -> None:
    """The event's schema (types, patterns, bounds), as decoding would check it."""
    try:
        # Strict: a count is a JSON integer, never ``true``, ``"1"`` or ``1.0``.
        _VALIDATE_EVENT(dumps_canonical(members), strict=True)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"])
        raise error(
            ErrorCode.JOURNAL_MALFORMED_RECORD,
            f"{where}: {problem['msg']}",
            path=at(position),
        ) from None


def _listed_digests(bundle: Bundle, referenced: list[str]) -> None:
    """The bundle lists exactly the records its journal references."""
    if list(bundle.digests) != referenced:
        missing = [d for d in referenced if d not in set(bundle.digests)]
        raise error(
            ErrorCode.AUDIT_RECORD_MISSING,
            f"record {missing[0]} is not listed"
            if missing
            else "the record list is not exactly the journal's references, in order",
            path="records",
        )


def _summarise(report: AuditReport, event: dict[str, Any], waits: set[str]) -> None:
    transition, node, number = event["transition"], event["node"], event["activation"]
    if transition == "work-completed":
        report.path.append(f"{node}#{number}")
        if node in waits:
            report.waits.append(
                {
                    "node": node,
                    "activation": number,
                    "ordinal": event["ordinal"],
                    "approvals": [
                        {"actor": a["actor"], "role": a["role"]} for a in event["approvals"]
                    ],
                }
            )
    elif transition == "work-failed":
        report.path.append(f"{node}#{number} failed")
    actor = event["actor"]
    answered = transition == "block-cleared" and actor.get("kind") == "automation"
    if (
        actor["id"] != _HOST_ACTOR
        and not answered
        and not (node in waits and transition in ("block-cleared", "work-completed"))
    ):
        report.directives.append(
            {
                "ordinal": event["ordinal"],
                "transition": transition,
                "node": node,
                "activation": number,
                "actor": actor["id"],
                "rationale": event["rationale"],
            }
        )
