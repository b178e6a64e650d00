"""The audit's fast lane: the Host's common events, checked from the line's bytes.

Most of a Host journal is three transitions: ``dependencies-satisfied``,
``work-started`` and ``work-completed`` of automated nodes. For each the lane
compiles, once per journal, one regular expression of the whole line in the
writer's shape (decision 0044). A match proves the canonical form (as the
verify template does), the event schema (every member's type, pattern and
bound, written out for that transition) and the payload rule (which optional
members that transition carries: the others are literal ``null`` or ``[]``);
the execution is the header's, spelled literally. What is left (the node state
table, dependencies, attempts, outputs, requests, the graph's edges and
``max_visits``, record schemas) is checked in plain Python against the replay
state, the same tables the generic path reads.

The lane only ever accepts. Whenever it cannot decide an event (another
transition, a role, a human or hybrid task, an approval requirement, a wait,
parallel or terminal node, a failed predecessor, an open batch, a line outside
the shape, or any rule that would refuse), it returns False having changed
nothing, and the event goes through the generic path, which decides and words
the refusal. An accepted event is folded into the same ``ReplayState``,
``GraphRules``, chain and report as the generic path would fold it.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final

from contracts._errors import ExecsysError
from contracts._ids import Digest, NodeId
from contracts._journal import NodeState, Transition
from contracts._spec import ActionNode, ControlGraph, OperationNode, ParallelNode
from host.journal._audit_graph import GraphRules
from host.journal._chain import ChainCheck
from host.journal._state import LIVE_STATES, ActivationState, AttemptState, ReplayState
from host.journal._template import UNSAFE

_COUNT = rb"([1-9][0-9]{0,14}+)"
"""A count: at most 15 digits, so far below ``MAX_JOURNAL_INT``."""
_TOKEN = rb'"([^"]{1,256}+)"'
"""A token on an ASCII line without escapes: 1 to 256 characters."""
_NAME = rb'"([^"]*+)"'
"""A node id: valid when it is one of the header's (validated) declarations."""
_SHA = rb'"(sha256:[0-9a-f]{64})"'
_HEX = rb'"sha256:([^"]*+)"'
"""A digest the caller compares with one it computed."""
_TIME = rb'"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z"'
_PREDECESSOR = rb'\{"activation":[1-9][0-9]{0,14}+,"node":"[^"]*+"\}'
_REF = rb'\{"digest":"sha256:[0-9a-f]{64}","id":"[^"]{1,256}+","kind":"[^"]{1,256}+"\}'

_PREDECESSORS: Final = re.compile(rb'\{"activation":([0-9]++),"node":"([^"]*+)"\}').findall
_REFS: Final = re.compile(rb'\{"digest":"([^"]*+)","id":"([^"]*+)","kind":"([^"]*+)"\}').findall
_CUT: Final = len(b',"digest":"sha256:')
_TRANSITION: Final = len(b'"transition":"')

_READY, _ACTIVE, _COMPLETED = NodeState.READY, NodeState.ACTIVE, NodeState.COMPLETED
_PENDING = NodeState.PENDING
_STARTED, _DONE = Transition.WORK_STARTED, Transition.WORK_COMPLETED
_HOST = b"host"


def _members(execution: bytes, transition: str, prior: str, result: str, **shapes: bytes) -> bytes:
    """The whole line's pattern for one transition (members in canonical order)."""
    values = {
        "activation": rb"(?P<activation>[1-9][0-9]{0,14}+)",
        "actor": rb'\{"id":"(?P<actor>[^"]{1,256}+)","kind":"(?:automation|human)","role":null\}',
        "approvals": rb"\[\]",
        "attempt": b"null",
        "authorization": b"null",
        "batch": b"null",
        "error": b"null",
        "execution": re.escape(b'"' + execution + b'"'),
        "invalidation": b"null",
        "node": rb'"(?P<node>[^"]*+)"',
        "ordinal": rb"(?P<ordinal>[1-9][0-9]{0,14}+)",
        "predecessors": rb"\[\]",
        "prior": rb'"sha256:(?P<prior>[^"]*+)"',
        "prior_state": re.escape(f'"{prior}"'.encode()),
        "rationale": rb'"(?P<rationale>[^"]{0,4096}+)"',
        "record": rb'"event"',
        "refs": rb"\[\]",
        "request": rb'"(?P<request>[^"]{1,256}+)"',
        "request_digest": rb'"(?P<request_digest>sha256:[0-9a-f]{64})"',
        "result_state": re.escape(f'"{result}"'.encode()),
        "successor": b"null",
        "time": _TIME,
        "transition": re.escape(f'"{transition}"'.encode()),
        **shapes,
    }
    low = b",".join(b'"' + k.encode() + b'":' + values[k] for k in sorted(values) if k < "digest")
    high = b",".join(b'"' + k.encode() + b'":' + values[k] for k in sorted(values) if k > "digest")
    return rb"\{" + low + rb',"digest":"sha256:(?P<digest>[^"]*+)"(?P<high>,' + high + rb"\})"


_REF_LIST = rb"\[(?P<refs>(?:" + _REF + rb"(?:," + _REF + rb")*+)?+)\]"
_ATTEMPT = rb'\{"id":"(?P<attempt>[^"]{1,256}+)","sequence":(?P<sequence>[1-9][0-9]{0,14}+)\}'

#: Each lane transition's named groups, in the order ``match.groups()`` returns them.
_STEP = ("activation", "actor", "attempt", "sequence", "digest", "high", "node", "ordinal")
_TAIL = ("prior", "rationale", "refs", "request", "request_digest")
LAYOUT: Final[dict[str, tuple[str, ...]]] = {
    "dependencies-satisfied": (
        *("activation", "actor", "digest", "high", "node", "ordinal", "first", "node1", "more"),
        *("prior", "rationale", "request", "request_digest"),
    ),
    "work-started": (*_STEP, *_TAIL),
    "work-completed": (*_STEP, *_TAIL),
}


def lane_patterns(execution: str) -> dict[str, re.Pattern[bytes]]:
    """The three line patterns for a journal of ``execution`` (checked against ``LAYOUT``)."""
    name = execution.encode()
    patterns = {
        "dependencies-satisfied": _members(
            name,
            "dependencies-satisfied",
            "pending",
            "ready",
            predecessors=rb'\[\{"activation":(?P<first>[1-9][0-9]{0,14}+),"node":"(?P<node1>'
            rb'[^"]*+)"\}(?P<more>(?:,' + _PREDECESSOR + rb")*+)\]",
        ),
        "work-started": _members(
            name, "work-started", "ready", "active", attempt=_ATTEMPT, refs=_REF_LIST
        ),
        "work-completed": _members(
            name, "work-completed", "active", "completed", attempt=_ATTEMPT, refs=_REF_LIST
        ),
    }
    compiled = {key: re.compile(pattern + rb"\n?") for key, pattern in patterns.items()}
    for key, pattern in compiled.items():
        if tuple(pattern.groupindex) != LAYOUT[key]:  # pragma: no cover - a typo guard
            raise ValueError(f"the {key} lane pattern's groups are not its layout")
    return compiled


class AuditLane:
    """Accepts (and folds in) the events it can decide; see the module doc."""

    def __init__(
        self,
        graph: ControlGraph,
        state: ReplayState,
        chain: ChainCheck,
        rules: GraphRules,
        references: dict[str, None],
        report: Any,
    ) -> None:
        self.state, self.chain, self.rules, self.references = state, chain, rules, references
        self.report = report
        patterns = lane_patterns(chain.execution)
        handlers = {
            "dependencies-satisfied": AuditLane._ready,
            "work-started": AuditLane._start,
            "work-completed": AuditLane._complete,
        }
        # transition -> (fullmatch, handler, group numbers of digest, high, ordinal, prior)
        self.handlers: dict[bytes, tuple[Any, ...]] = {}
        for name, pattern in patterns.items():
            index = pattern.groupindex
            self.handlers[name.encode()] = (
                pattern.fullmatch,
                handlers[name],
                index["digest"],
                index["high"],
                index["ordinal"],
                index["prior"],
            )
        self.nodes: dict[bytes, NodeId] = {nid.encode(): NodeId(nid) for nid in state.rules}
        self.limits = {nid: node.max_visits for nid, node in graph.nodes.items()}
        self.outputs = frozenset(
            nid for nid, node in graph.nodes.items() if isinstance(node, ActionNode | OperationNode)
        )
        # (source, target) edges along which a completed predecessor needs no
        # further graph check: a normal edge with no route, selection or barrier
        # to consult (routes and selections are read only with records).
        self.plain: set[tuple[str, str]] = set()
        for source, targets in rules.normal.items():
            node = graph.nodes[source]
            consults = rules.load is not None and (
                getattr(node, "routes", None) is not None or isinstance(node, ParallelNode)
            )
            for target in targets:
                if not consults and target not in rules.barriers:
                    self.plain.add((source, target))
        self.head = chain.head[7:].encode()
        self.pending: list[bytes] = []
        self.first = 1
        self.position = 0
        """The last position the lane accepted (0: none since the last flush)."""

    def flush(self, *, final: bool = False) -> None:
        """Hand what the lane accepted to the chain, state and report (before any generic step).

        ``final``: no event follows, so the chain's digest table (which only
        tells a duplicate from a gap in a later event) is not filled in.
        """
        if not self.position:
            return
        if not final:
            seen = self.chain.seen
            for offset, accepted in enumerate(self.pending):
                seen["sha256:" + accepted.decode()] = self.first + offset
        head = Digest("sha256:" + self.head.decode())
        self.chain.resume(head, self.position)
        self.state.head = head
        self.report.events, self.report.head = self.position, head
        self.pending.clear()
        self.first = self.position + 1
        self.position = 0

    def resync(self) -> None:
        """Take the chain's head after a generic step (the lane continues from it)."""
        self.head = self.chain.head[7:].encode()
        self.first = self.chain.count + 1

    def event(self, line: bytes, position: int) -> bool:
        """Accept and fold in the event on ``line``, or return False having changed nothing."""
        if self.state.batch is not None or self.rules.terminal is not None:
            return False
        end = len(line) - 1 if line.endswith(b"\n") else len(line)
        found = self.handlers.get(line[line.rfind(b'"transition":"') + _TRANSITION : end - 2])
        if found is None:
            return False
        fullmatch, handler, digest, high, ordinal, prior = found
        match = fullmatch(line)
        if match is None or match.end(high) != end or not line.isascii():
            return False
        if len(line.translate(None, UNSAFE)) != end:
            return False
        start, stop = match.span(digest)
        hasher = hashlib.sha256(line[: start - _CUT])
        hasher.update(line[stop + 1 : end])
        stated = line[start:stop]
        if (
            hasher.hexdigest().encode() != stated
            or match.group(prior) != self.head
            or int(match.group(ordinal)) != position
        ):
            return False
        try:
            if not handler(self, match.groups(), position):
                return False
        except ExecsysError:
            return False  # a graph rule refuses: the generic path words it
        self.pending.append(stated)
        self.head = stated
        self.position = position
        return True

    # --- the three transitions -------------------------------------------------------

    def _directive(
        self, transition: str, key: tuple[str, int], actor: bytes, ordinal: int, rationale: bytes
    ) -> None:
        """The directive entry ``_summarise`` writes for an event not asked for by the Host."""
        self.report.directives.append(
            {
                "ordinal": ordinal,
                "transition": transition,
                "node": key[0],
                "activation": key[1],
                "actor": actor.decode(),
                "rationale": rationale.decode(),
            }
        )

    def _ready(self, groups: tuple[Any, ...], ordinal: int) -> bool:
        (activation, actor, _, _, name, _, first, name1, more, _, rationale, request, rdigest) = (
            groups
        )
        state = self.state
        node = self.nodes.get(name)
        if node is None:
            return False
        rule = state.rules[node]
        number = int(activation)
        key = (node, number)
        activations, latest = state.activations, state.latest
        record = activations.get(key)
        limit = self.limits[node]
        if record is None:
            # _check_activation, then state_of is pending (not the start node's
            # next activation, which is ready), then max_visits for one more visit.
            last = latest.get(node, 0)
            if number != last + 1 or (last and activations[(node, last)].state in LIVE_STATES):
                return False
            retired = state.retired.get(node, 0)
            if node == state.header.start and retired == last:
                return False
            if limit is not None and last - retired + 1 > limit:
                return False
        elif record.state is not _PENDING or (
            limit is not None and latest.get(node, 0) - state.retired.get(node, 0) > limit
        ):
            return False
        source = self.nodes.get(name1)
        pred = (source, int(first))
        if more:
            preds = [pred]
            preds.extend((self.nodes.get(n), int(a)) for a, n in _PREDECESSORS(more))
        else:
            preds = [pred]
        upstream = rule.upstream
        for index, pred in enumerate(preds):
            source = pred[0]
            if source is None or source not in upstream or pred in preds[:index]:
                return False
            found = activations.get(pred)  # type: ignore[arg-type]
            if found is None or found.state is not _COMPLETED or latest.get(source) != pred[1]:
                return False
        ask = request.decode()
        if ask in state.requests:
            return False
        plain = self.plain
        for pred in preds:
            if (pred[0], node) not in plain:
                self.rules._dependencies(
                    state, key, [{"node": p[0], "activation": p[1]} for p in preds], ordinal
                )
                break
        # Fold in (ReplayState.apply for this transition).
        if record is None:
            record = ActivationState(_READY, ordinal)
            activations[key] = record
            latest[node] = number
        record.state = _READY
        record.events.append(ordinal)
        record.predecessors = tuple(preds)  # type: ignore[arg-type]
        for pred in preds:
            activations[pred].dependents.append(key)  # type: ignore[index]
        state.requests[ask] = (rdigest.decode(), ordinal, ordinal)
        state.count = ordinal
        if actor != _HOST:
            self._directive("dependencies-satisfied", key, actor, ordinal, rationale)
        return True

    def _start(self, groups: tuple[Any, ...], ordinal: int) -> bool:
        (
            activation,
            actor,
            attempt,
            sequence,
            _,
            _,
            name,
            _,
            _,
            rationale,
            refs,
            request,
            rdigest,
        ) = groups
        state = self.state
        node = self.nodes.get(name)
        if node is None or _STARTED in state.rules[node].human_steps:
            return False
        number = int(activation)
        key = (node, number)
        record = state.activations.get(key)
        if record is None:
            # Only the start node's next activation is ready without an event.
            last = state.latest.get(node, 0)
            retired = state.retired.get(node, 0)
            limit = self.limits[node]
            if (
                node != state.header.start
                or number != last + 1
                or retired != last
                or (last and state.activations[(node, last)].state in LIVE_STATES)
                or (limit is not None and last - retired + 1 > limit)
            ):
                return False
            attempts: list[AttemptState] = []
        elif record.state is not _READY:
            return False
        else:
            attempts = record.attempts
        ident = attempt.decode()
        count = int(sequence)
        if count != len(attempts) + 1 or any(old.id == ident for old in attempts):
            return False
        ask = request.decode()
        if ask in state.requests:
            return False
        if record is None:
            record = ActivationState(_ACTIVE, ordinal)
            state.activations[key] = record
            state.latest[node] = number
        record.state = _ACTIVE
        record.events.append(ordinal)
        record.attempts.append(AttemptState(ident, count, ordinal))
        state.requests[ask] = (rdigest.decode(), ordinal, ordinal)
        state.count = ordinal
        if refs:  # a launch record, say: only listed (note_references)
            for digest, _ident, _kind in _REFS(refs):
                self.references.setdefault(digest.decode())
        if actor != _HOST:
            self._directive("work-started", key, actor, ordinal, rationale)
        return True

    def _complete(self, groups: tuple[Any, ...], ordinal: int) -> bool:
        (
            activation,
            actor,
            attempt,
            sequence,
            _,
            _,
            name,
            _,
            _,
            rationale,
            refs,
            request,
            rdigest,
        ) = groups
        state = self.state
        node = self.nodes.get(name)
        if node is None or node not in self.outputs:
            return False
        rule = state.rules[node]
        if _DONE in rule.human_steps or rule.needs_conduct or rule.decl.approval is not None:
            return False
        number = int(activation)
        key = (node, number)
        record = state.activations.get(key)
        if record is None or record.state is not _ACTIVE or not record.attempts:
            return False
        current = record.attempts[-1]
        if (
            current.outcome is not None
            or current.id != attempt.decode()
            or current.sequence != int(sequence)
        ):
            return False
        given = [(d.decode(), i.decode(), k.decode()) for d, i, k in _REFS(refs)]
        kinds = {(kind, ident): digest for digest, ident, kind in given}
        if not rule.outputs <= kinds.keys():
            return False
        ask = request.decode()
        if ask in state.requests:
            return False
        output = kinds.get(("output", f"{node}#{number}"))
        if output is None:
            return False
        load = self.rules.load
        if load is not None:
            self.rules._ports(self.rules.graph.nodes[node], key, load(output, ordinal), ordinal)
        record.state = _COMPLETED
        record.events.append(ordinal)
        current.outcome = _COMPLETED
        current.ended = ordinal
        state.requests[ask] = (rdigest.decode(), ordinal, ordinal)
        state.count = ordinal
        completed = self.rules.completed_refs
        references = self.references
        for digest, _ident, kind in given:
            completed[(key, kind)] = digest
            references.setdefault(digest)
        self.report.path.append(f"{node}#{number}")
        if actor != _HOST:
            self._directive("work-completed", key, actor, ordinal, rationale)
        return True
