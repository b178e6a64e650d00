"""Generate the audit fixture pack under ``tests/fixtures/audit/``.

Run ``python -m tests.audit.make_fixtures`` from the repository root and commit
the output. Every clean bundle is exported from a real delivery run on the Host
(``tests/host/harness.py``); every forged bundle edits one of them the way a
forger with the bundle would: change what the journal or a record says, then
re-chain every line and recompute the bundle digest, so that ``journal verify``
and the bundle's own digest both pass and only the audit's rules can refuse it.
Times and correlation ids differ from run to run, so ``test_fixtures`` checks
each file's audit outcome (``EXPECTED``), not its bytes.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contracts import AdmittedDelivery, AuthorityPolicy, InvocationRequest
from contracts._canonical import canonical_bytes, digest_of
from host.journal import encode_bundle, parse_bundle
from host.journal._codec import encode_fields
from tests.host.harness import Harness, graph_doc, make_delivery, reply

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "audit"
POLICY = AuthorityPolicy(
    actors={"alice": ("maintainer",), "carol": ("maintainer",), "bob": ("reviewer",)},
    approver="alice",
)
Behaviour = Callable[[InvocationRequest], Any]


def _out(value: dict[str, Any]) -> Behaviour:
    async def behave(request: InvocationRequest) -> Any:
        return reply(value)

    return behave


def _action(executor: str, outputs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"kind": "action", "executor": executor, "outputs": outputs, **extra}


_V = {"v": {"type": "integer"}}
_DONE = {"kind": "terminal", "outcome": "succeeded"}


# --- clean deliveries ----------------------------------------------------------------


def _fanout(h: Harness) -> AdmittedDelivery:
    """Subset fan-out (a, c of a, b, c; a required), then a two-approval wait."""
    nodes = {
        "plan": _action(
            "plan",
            {"pick": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True}},
            next="fan",
        ),
        "fan": {
            "kind": "parallel",
            "branches": ["a", "b", "c"],
            "select": "plan.pick",
            "required": ["a"],
            "barrier": "join",
        },
        "a": _action("work", _V, next="a2"),
        "a2": _action("work", _V, next="join"),
        "b": _action("work", _V, next="join"),
        "c": _action("work", _V, next="join"),
        "join": {"kind": "barrier", "next": "sign"},
        "sign": {
            "kind": "wait",
            "wait": "approval",
            "result": {
                "type": "object",
                "properties": {"approved": {"type": "boolean"}},
                "required": ["approved"],
            },
            "authority": {"roles": ["maintainer"], "min_count": 2, "distinct_actors": True},
            "next": "done",
        },
        "done": _DONE,
    }
    h.invoker.behaviours.update({"plan": _out({"pick": ["a", "c"]}), "work": _out({"v": 1})})
    delivery = make_delivery(graph_doc(nodes, "plan"), authority=POLICY, nonce="fanout")
    h.run(delivery)
    for actor in ("alice", "carol"):
        asyncio.run(
            h.host.resolve(delivery.delivery_id, "sign", actor, "maintainer", {"approved": True})
        )
    return delivery


def _loop(h: Harness) -> AdmittedDelivery:
    """A review loop: rework once (back to plan), then approve."""
    verdicts = iter(["rework", "approve"])

    async def review(request: InvocationRequest) -> Any:
        return reply({"verdict": next(verdicts)})

    nodes = {
        "plan": _action("plan", _V, next="review", max_visits=3),
        "review": _action(
            "review",
            {"verdict": {"enum": ["approve", "rework"]}},
            routes={"port": "verdict", "cases": {"approve": "done", "rework": "plan"}},
            max_visits=3,
        ),
        "done": _DONE,
    }
    h.invoker.behaviours.update({"plan": _out({"v": 2}), "review": review})
    delivery = make_delivery(graph_doc(nodes, "plan"), authority=POLICY, nonce="loop")
    h.run(delivery)
    return delivery


def _retry(h: Harness) -> AdmittedDelivery:
    """A retryable failure, then success on the second attempt."""
    attempts = iter([False, True])

    async def flaky(request: InvocationRequest) -> Any:
        if next(attempts):
            return reply({"v": 3})
        return {"status": "failed", "reason": "flaky", "retryable": True}

    nodes = {
        "work": _action("flaky", _V, retry={"max_attempts": 3}, next="done"),
        "done": _DONE,
    }
    h.invoker.behaviours["flaky"] = flaky
    delivery = make_delivery(graph_doc(nodes, "work"), authority=POLICY, nonce="retry")
    h.run(delivery)
    return delivery


def _failure(h: Harness) -> AdmittedDelivery:
    """A non-retryable failure routed to its declared failure successor."""

    async def broken(request: InvocationRequest) -> Any:
        return {"status": "failed", "reason": "broken", "retryable": False}

    nodes = {
        "work": _action("broken", _V, on_failure="triage", next="done"),
        "triage": {"kind": "terminal", "outcome": "failed"},
        "done": _DONE,
    }
    h.invoker.behaviours["broken"] = broken
    delivery = make_delivery(graph_doc(nodes, "work"), authority=POLICY, nonce="failure")
    h.run(delivery)
    return delivery


def _ask_then(value: int) -> Behaviour:
    async def ask(request: InvocationRequest) -> Any:
        if request.turn == 1:
            return {"status": "needs-input", "question": "which?", "session": "s"}
        return reply({"v": value})

    return ask


def _action_input(h: Harness) -> AdmittedDelivery:
    """An action that asks for input and continues the same invocation with the answer."""
    nodes = {"ask": _action("ask", _V, next="done"), "done": _DONE}
    h.invoker.behaviours["ask"] = _ask_then(4)
    delivery = make_delivery(graph_doc(nodes, "ask"), authority=POLICY, nonce="input")
    report = h.run(delivery)
    asyncio.run(h.host.answer(delivery.delivery_id, report.suspension.correlation, 7))
    return delivery


def _restart(h: Harness) -> AdmittedDelivery:
    """Restart from the first savepoint: the abandoned step is invalidated, then redone."""
    nodes = {
        "first": _action("first", _V, next="second"),
        "second": _action("second", _V, next="done"),
        "done": _DONE,
    }
    h.invoker.behaviours.update({"first": _out({"v": 1}), "second": _ask_then(5)})
    delivery = make_delivery(graph_doc(nodes, "first"), authority=POLICY, nonce="restart")
    h.run(delivery)
    savepoint = h.inspect(delivery).savepoints[0].savepoint
    report = asyncio.run(
        h.host.recover(
            delivery.delivery_id, "restart-from-savepoint", reason="redo", savepoint=savepoint
        )
    )
    asyncio.run(h.host.answer(delivery.delivery_id, report.suspension.correlation, 1))
    return delivery


def _retirement(h: Harness, did: str) -> dict[str, Any] | None:
    """The retirement fact as ``inspect`` shows it (what an export bundle carries)."""
    fact = h.host.inspect(did).retirement
    return fact.fact_json() if fact is not None else None


def _retired(h: Harness) -> AdmittedDelivery:
    """A completed delivery, then retired: its records are gone, its journal remains."""
    nodes = {"work": _action("one", _V, next="done"), "done": _DONE}
    h.invoker.behaviours["one"] = _out({"v": 6})
    delivery = make_delivery(graph_doc(nodes, "work"), authority=POLICY, nonce="retired")
    h.run(delivery)
    asyncio.run(h.host.retire(delivery.delivery_id, "ticket-7"))
    return delivery


SCENARIOS: dict[str, Callable[[Harness], AdmittedDelivery]] = {
    "fanout-approval": _fanout,
    "loop": _loop,
    "retry": _retry,
    "failure-successor": _failure,
    "action-input": _action_input,
    "restart-invalidation": _restart,
    "retired": _retired,
}


def export(h: Harness, delivery: AdmittedDelivery, *, records: bool = True) -> bytes:
    """The bundle ``execsys journal export --bundle`` writes, from the Host's public API."""
    did = delivery.delivery_id
    retired = h.host.status(did).status.value == "retired"
    return encode_bundle(
        h.host.delivery_document(did),
        h.host.journal_lines(did),
        None if retired or not records else h.host.record,
        retirement=_retirement(h, did) if retired else None,
    )


# --- forging ---------------------------------------------------------------------------


class Forgery:
    """A bundle taken apart so that its journal and records can be edited and re-chained."""

    def __init__(self, data: bytes) -> None:
        bundle = parse_bundle(data)
        self.delivery = copy.deepcopy(bundle.delivery)
        self.header = _fields(bundle.journal[0])
        self.events = [_fields(line) for line in bundle.journal[1:]]
        self.records = {d: json.loads(v) for d, v in (bundle.records or {}).items()}
        self.raw: dict[str, bytes] = {}
        """Record bodies written as given (not re-encoded), to forge a digest mismatch."""
        self.retirement = bundle.retirement

    def find(self, **match: Any) -> int:
        """Index of the first event whose fields equal ``match``."""
        for index, event in enumerate(self.events):
            if all(event.get(k) == v for k, v in match.items()):
                return index
        raise LookupError(match)

    def put_record(self, value: Any) -> str:
        digest = digest_of(value)
        self.records[digest] = value
        return digest

    def rebind(self) -> None:
        """After editing the delivery document: a new id and graph digest, everywhere."""
        admitted = AdmittedDelivery.model_validate_json(canonical_bytes(self.delivery))
        self.header["execution"] = admitted.delivery_id
        self.header["graph"] = admitted.graph_digest
        self.header["authority"] = admitted.authority_digest
        for event in self.events:
            event["execution"] = admitted.delivery_id

    def bytes(self, *, cut: int | None = None) -> bytes:
        """Re-chain (keeping events up to index ``cut``) and write the bundle."""
        events = self.events if cut is None else self.events[: cut + 1]
        head, header_line = encode_fields(self.header)
        lines = [header_line]
        for ordinal, event in enumerate(events, start=1):
            event["ordinal"], event["prior"] = ordinal, head
            head, line = encode_fields(event)
            lines.append(line)
        data = encode_bundle(
            self.delivery,
            lines,
            (lambda d: self.records[d]) if self.retirement is None else None,
            retirement=self.retirement,
        )
        for digest, body in self.raw.items():
            good = b'{"digest":"' + digest.encode() + b'","value":'
            start = data.index(good) + len(good)
            end = data.index(b"}\n", start)
            data = data[:start] + body + data[end:]
        if self.raw:  # a forger recomputes the bundle digest too
            body_end = data.rindex(b"\n", 0, len(data) - 1) + 1
            digest = "sha256:" + hashlib.sha256(data[:body_end]).hexdigest()
            data = data[:body_end] + canonical_bytes({"digest": digest, "signature": None}) + b"\n"
        return data


def _fields(line: bytes) -> dict[str, Any]:
    fields: dict[str, Any] = json.loads(line)
    del fields["digest"]
    return fields


def _forgeries(clean: dict[str, bytes]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}

    # Header: a looser node declaration (the wait needs one approval, not two).
    f = Forgery(clean["fanout-approval"])
    for decl in f.header["nodes"]:
        if decl["id"] == "sign":
            decl["approval"]["min_count"] = 1
    out["forged-header-nodes"] = f.bytes()

    # Header: the policy swapped for one that makes mallory a maintainer.
    f = Forgery(clean["fanout-approval"])
    f.delivery["authority"]["actors"]["mallory"] = ["maintainer"]
    out["forged-policy-swap"] = f.bytes()

    # Event schema: a time that is no instant (the chain and canonical form still hold).
    f = Forgery(clean["loop"])
    f.events[0]["time"] = "yesterday"
    out["forged-event-schema"] = f.bytes(cut=0)

    # State table: a completion straight from ready.
    f = Forgery(clean["loop"])
    i = f.find(node="plan", transition="work-started")
    f.events[i].update(transition="work-completed", result_state="completed")
    out["forged-invalid-transition"] = f.bytes(cut=i)

    # Dependencies: the barrier names a node with no edge into it.
    f = Forgery(clean["fanout-approval"])
    i = f.find(node="join", transition="dependencies-satisfied")
    f.events[i]["predecessors"] = [{"node": "plan", "activation": 1}]
    out["forged-dependency-gap"] = f.bytes(cut=i)

    # Undeclared edge: the failure successor ran after a success.
    f = Forgery(clean["failure-successor"])
    i = f.find(node="work", transition="work-failed")
    event = f.events[i]
    event.update(
        transition="work-completed",
        result_state="completed",
        error=None,
        refs=[
            {
                "kind": "output",
                "id": "work#1",
                "digest": f.put_record({"v": 1}),
            }
        ],
    )
    j = f.find(node="triage", transition="dependencies-satisfied")
    out["forged-failure-edge"] = f.bytes(cut=j)

    # Route: review said rework (-> plan), but done ran.
    f = Forgery(clean["loop"])
    i = f.find(node="plan", activation=2, transition="dependencies-satisfied")
    f.events[i].update(node="done", activation=1)
    out["forged-route"] = f.bytes(cut=i)

    # Selection: b ran although plan picked a and c.
    f = Forgery(clean["fanout-approval"])
    i = f.find(node="c", transition="dependencies-satisfied")
    f.events[i]["node"] = "b"
    out["forged-unselected-branch"] = f.bytes(cut=i)

    # Selection record: claims a, b, c; plan picked a and c.
    f = Forgery(clean["fanout-approval"])
    i = f.find(node="fan", transition="work-completed")
    f.events[i]["refs"][0]["digest"] = f.put_record({"selected": ["a", "b", "c"], "round": 1})
    out["forged-selection"] = f.bytes(cut=i)

    # Barrier: fired after a alone; c was selected too.
    f = Forgery(clean["fanout-approval"])
    i = f.find(node="join", transition="dependencies-satisfied")
    f.events[i]["predecessors"] = [{"node": "a2", "activation": 1}]
    out["forged-barrier"] = f.bytes(cut=i)

    # max_visits: the graph (re-bound: new id, new digests) says plan runs once; it ran twice.
    f = Forgery(clean["loop"])
    f.delivery["graph"]["nodes"]["plan"]["max_visits"] = 1
    f.rebind()
    out["forged-max-visits"] = f.bytes()

    # Terminal: work after done ended the delivery.
    f = Forgery(clean["fanout-approval"])
    i = f.find(node="c", transition="dependencies-satisfied")
    late = copy.deepcopy(f.events[i])
    late.update(node="b", request="b/1/dependencies-satisfied/0")
    f.events.append(late)
    out["forged-after-terminal"] = f.bytes()

    # Records: a completion that references no output.
    f = Forgery(clean["loop"])
    i = f.find(node="plan", transition="work-completed")
    f.events[i]["refs"] = []
    out["forged-missing-output"] = f.bytes(cut=i)

    # Records: an output that breaks its port schema (re-digested and re-referenced).
    f = Forgery(clean["loop"])
    i = f.find(node="plan", transition="work-completed")
    f.events[i]["refs"][0]["digest"] = f.put_record({"v": "two"})
    out["forged-output-schema"] = f.bytes(cut=i)

    # Records: the record's bytes changed under its digest (bundle digest recomputed).
    f = Forgery(clean["loop"])
    i = f.find(node="plan", transition="work-completed")
    f.raw[f.events[i]["refs"][0]["digest"]] = b'{"v":9}'
    out["forged-record-digest"] = f.bytes()

    # Approvals: mallory (no role in the policy) approves.
    f = Forgery(clean["fanout-approval"])
    i = f.find(node="sign", transition="work-completed")
    f.events[i]["approvals"][1]["actor"] = "mallory"
    out["forged-approval-role"] = f.bytes(cut=i)

    # Approvals: one approval where two are required.
    f = Forgery(clean["fanout-approval"])
    i = f.find(node="sign", transition="work-completed")
    f.events[i]["approvals"] = f.events[i]["approvals"][:1]
    out["forged-approval-count"] = f.bytes(cut=i)

    # Approvals: alice twice (distinct actors required).
    f = Forgery(clean["fanout-approval"])
    i = f.find(node="sign", transition="work-completed")
    f.events[i]["approvals"][1]["actor"] = "alice"
    out["forged-approval-repeat"] = f.bytes(cut=i)

    # Approvals: the conduct record lists another approver than the event.
    f = Forgery(clean["fanout-approval"])
    i = f.find(node="sign", transition="work-completed")
    conduct = next(r for r in f.events[i]["refs"] if r["kind"] == "conduct")
    body = copy.deepcopy(f.records[conduct["digest"]])
    body["approvals"][1]["actor"] = "bob"
    conduct["digest"] = f.put_record(body)
    out["forged-conduct"] = f.bytes(cut=i)

    # Invalidation: the batch leaves out a dependent activation.
    f = Forgery(clean["restart-invalidation"])
    batch = [k for k, e in enumerate(f.events) if e["transition"] == "work-invalidated"]
    size = len(batch) - 1
    del f.events[batch[-1]]
    for index, k in enumerate(batch[:-1], start=1):
        f.events[k]["batch"] = {"index": index, "size": size}
    out["forged-partial-invalidation"] = f.bytes(cut=batch[-2])

    # Successor: bound to an activation that was never invalidated.
    f = Forgery(clean["loop"])
    i = f.find(node="plan", transition="work-completed")
    bound = copy.deepcopy(f.events[i])
    bound.update(
        transition="successor-bound",
        prior_state="completed",
        result_state="superseded",
        request="bind-1",
        attempt=None,
        refs=[],
        batch={"index": 1, "size": 1},
        successor={"execution": "d-other", "header": "sha256:" + "0" * 64},
    )
    f.events.insert(i + 1, bound)
    out["forged-successor"] = f.bytes(cut=i + 1)

    # Retirement: the fact was taken at another head (the journal was cut after it).
    f = Forgery(clean["retired"])
    out["forged-retirement"] = f.bytes(cut=len(f.events) - 2)
    return out


#: file -> expected audit outcome: "ok", or "<CODE>@<ordinal>" of the first violation.
EXPECTED: dict[str, str] = {
    **{f"{name}.bundle": "ok" for name in SCENARIOS},
    "fanout-digests.bundle": "ok",
    "forged-header-nodes.bundle": "AUDIT_HEADER_MISMATCH@0",
    "forged-policy-swap.bundle": "AUDIT_HEADER_MISMATCH@0",
    "forged-event-schema.bundle": "JOURNAL_MALFORMED_RECORD@1",
    "forged-invalid-transition.bundle": "JOURNAL_INVALID_TRANSITION@1",
    "forged-dependency-gap.bundle": "JOURNAL_DEPENDENCY_GAP@15",
    "forged-failure-edge.bundle": "AUDIT_UNDECLARED_EDGE@3",
    "forged-route.bundle": "AUDIT_ROUTE_MISMATCH@6",
    "forged-unselected-branch.bundle": "AUDIT_BRANCH_UNSELECTED@8",
    "forged-selection.bundle": "AUDIT_SELECTION_INVALID@5",
    "forged-barrier.bundle": "AUDIT_BARRIER_MISMATCH@15",
    "forged-max-visits.bundle": "AUDIT_MAX_VISITS_EXCEEDED@6",
    "forged-after-terminal.bundle": "AUDIT_AFTER_TERMINAL@28",
    "forged-missing-output.bundle": "AUDIT_RECORD_MISSING@2",
    "forged-output-schema.bundle": "AUDIT_RECORD_SCHEMA_VIOLATION@2",
    "forged-record-digest.bundle": "AUDIT_RECORD_DIGEST_MISMATCH@2",
    "forged-approval-role.bundle": "JOURNAL_FORGED_ROLE@24",
    "forged-approval-count.bundle": "JOURNAL_APPROVAL_INVALID@24",
    "forged-approval-repeat.bundle": "JOURNAL_APPROVAL_INVALID@24",
    "forged-conduct.bundle": "AUDIT_APPROVAL_MISMATCH@24",
    "forged-partial-invalidation.bundle": "JOURNAL_PARTIAL_INVALIDATION@6",
    "forged-successor.bundle": "JOURNAL_BAD_SUCCESSOR@3",
    "forged-retirement.bundle": "AUDIT_RETIREMENT_MISMATCH@None",
}


def build_all(tmp: Path) -> dict[str, bytes]:
    """Run every scenario on a fresh Host and return ``file name -> bytes``."""
    h = Harness(tmp, {})
    try:
        clean: dict[str, bytes] = {}
        deliveries: dict[str, AdmittedDelivery] = {}
        for name, scenario in SCENARIOS.items():
            deliveries[name] = scenario(h)
            clean[name] = export(h, deliveries[name])
        files = {f"{name}.bundle": data for name, data in clean.items()}
        files["fanout-digests.bundle"] = export(h, deliveries["fanout-approval"], records=False)
        forged = _forgeries(clean)
        files.update({f"{name}.bundle": data for name, data in forged.items()})
        return files
    finally:
        h.close()


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        files = build_all(Path(tmp))
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for old in FIXTURES.glob("*.bundle"):
        old.unlink()
    for name, data in sorted(files.items()):
        (FIXTURES / name).write_bytes(data)
    missing = sorted(set(EXPECTED) ^ set(files))
    if missing:
        print("EXPECTED and the generated files differ:", missing, file=sys.stderr)
        return 1
    print(f"wrote {len(files)} bundles to {FIXTURES}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
