"""The audit's fast lane: the Host's common events, checked from the line's bytes.

Most of a Host journal is three transitions: ``dependencies-satisfied``,
``work-started`` and ``work-completed`` of automated nodes. For each the lane
compiles, once per journal, one regular expression of the whole line in the
writer's shape (decision 0044). A match proves the canonical form (as the
verify template does, but with every free string spelled in ``_TEXT``, so the
match itself rules out non-ASCII, control bytes, backslashes and DEL; decision
0120), the event schema (every member's type, pattern and bound, written out
for that transition) and the payload rule (which optional members that
transition carries: the others are literal ``null`` or ``[]``); the execution
is the header's, spelled literally. What is left (the node state table,
dependencies, attempts, outputs, requests, the graph's edges and
``max_visits``, record schemas) is checked in plain Python against the replay
state, the same tables the generic path reads.

The lane only ever accepts. :meth:`AuditLane.run` walks the journal from a
position and stops at the first event it cannot decide (another transition, a
role, a human or hybrid task, an approval requirement, a wait, parallel or
terminal node, a failed predecessor, an open batch, a line outside the shape,
or any rule that would refuse), having changed nothing of it; that event goes
through the generic path, which decides and words the refusal. An accepted
event is folded into the same ``ReplayState``, ``GraphRules``, chain and report
as the generic path would fold it.
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
from host.journal._codec import loads_json
from host.journal._state import LIVE_STATES, ActivationState, AttemptState, Key, ReplayState

_TEXT = rb"[ !#-\[\]-~]"
"""One character of a string the lane reads: printable ASCII but the quote and backslash.

Every byte of a line a lane pattern matches is pattern text, a digit or hex
digit the pattern names, a character of this class, or part of the two
digests the lane compares with ones it holds (``prior`` with the previous
record's, ``digest`` with the one it computes): so the match alone proves the
line ASCII with no control byte, backslash or DEL, the bytes ``UNSAFE`` names.
"""
_TIME = rb'"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z"'
_PREDECESSOR = rb'\{"activation":[1-9][0-9]{0,14}+,"node":"' + _TEXT + rb'*+"\}'
_REF = (
    rb'\{"digest":"sha256:[0-9a-f]{64}","id":"'
    + _TEXT
    + rb'{1,256}+","kind":"'
    + _TEXT
    + rb'{1,256}+"\}'
)

_PREDECESSORS: Final = re.compile(rb'\{"activation":([0-9]++),"node":"([^"]*+)"\}').findall
_REFS: Final = re.compile(rb'\{"digest":"([^"]*+)","id":"([^"]*+)","kind":"([^"]*+)"\}').findall
_DIGEST_AT: Final = len(b'{"digest":"')
_REF_HEAD: Final = len(b'{"digest":"sha256:') + 64
"""A reference's bytes up to the end of its digest (its digest is ``[_DIGEST_AT:_REF_HEAD]``)."""
_TAIL_BYTES: Final = 9
"""Bytes at the end of a line that tell the lane's transitions apart (``run``)."""
_TEXTS: Final = re.compile(_TEXT + rb"*+").fullmatch

_READY, _ACTIVE, _COMPLETED = NodeState.READY, NodeState.ACTIVE, NodeState.COMPLETED
_PENDING = NodeState.PENDING
_STARTED, _DONE = Transition.WORK_STARTED, Transition.WORK_COMPLETED
_HOST = b"host"


def _members(execution: bytes, transition: str, prior: str, result: str, **shapes: bytes) -> bytes:
    """The whole line's pattern for one transition (members in canonical order)."""
    values = {
        "activation": rb"(?P<activation>[1-9][0-9]{0,14}+)",
        "actor": rb'\{"id":"(?P<actor>'
        + _TEXT
        + rb'{1,256}+)","kind":"(?:automation|human)","role":null\}',
        "approvals": rb"\[\]",
        "attempt": b"null",
        "authorization": b"null",
        "batch": b"null",
        "error": b"null",
        "execution": re.escape(b'"' + execution + b'"'),
        "invalidation": b"null",
        "node": rb'"(?P<node>' + _TEXT + rb'*+)"',
        "ordinal": rb"(?P<ordinal>[1-9][0-9]{0,14}+)",
        "predecessors": rb"\[\]",
        "prior": rb'"sha256:(?P<prior>[^"]*+)"',
        "prior_state": re.escape(f'"{prior}"'.encode()),
        "rationale": rb'"' + _TEXT + rb'{0,4096}+"',
        "record": rb'"event"',
        "refs": rb"\[\]",
        "request": rb'"(?P<request>' + _TEXT + rb'{1,256}+)"',
        "request_digest": rb'"sha256:[0-9a-f]{64}"',
        "result_state": re.escape(f'"{result}"'.encode()),
        "successor": b"null",
        "time": _TIME,
        "transition": re.escape(f'"{transition}"'.encode()),
        **shapes,
    }
    low = b",".join(b'"' + k.encode() + b'":' + values[k] for k in sorted(values) if k < "digest")
    high = b",".join(b'"' + k.encode() + b'":' + values[k] for k in sorted(values) if k > "digest")
    return (
        rb"(?P<low>\{" + low + rb'),"digest":"sha256:(?P<digest>[^"]*+)"(?P<high>,' + high + rb"\})"
    )


_REF_LIST = rb"\[(?P<refs>(?:" + _REF + rb"(?:," + _REF + rb")*+)?+)\]"
_ATTEMPT = (
    rb'\{"id":"(?P<attempt>' + _TEXT + rb'{1,256}+)","sequence":(?P<sequence>[1-9][0-9]{0,14}+)\}'
)

#: Each lane transition's named groups, in the order ``match.groups()`` returns them.
#: ``low`` and ``high`` are the line before and after the digest member: together
#: the record's canonical JSON, the bytes its digest covers.
_STEP = ("low", "activation", "actor", "attempt", "sequence", "digest", "high", "node")
_TAIL = ("ordinal", "prior", "refs", "request")
LAYOUT: Final[dict[str, tuple[str, ...]]] = {
    "dependencies-satisfied": (
        *("low", "activation", "actor", "digest", "high", "node", "ordinal"),
        *("first", "node1", "more", "prior", "request"),
    ),
    "work-started": (*_STEP, *_TAIL),
    "work-completed": (*_STEP, *_TAIL),
}


def lane_patterns(execution: str) -> dict[str, re.Pattern[bytes]]:
    """The three line patterns for a journal of ``execution`` (checked against ``LAYOUT``).

    None of them for an execution id outside ``_TEXT`` (spelled literally, it would let
    unsafe bytes into a match): the lane then accepts nothing.
    """
    name = execution.encode()
    if _TEXTS(name) is None:
        return {}
    patterns = {
        "dependencies-satisfied": _members(
            name,
            "dependencies-satisfied",
            "pending",
            "ready",
            predecessors=rb'\[\{"activation":(?P<first>[1-9][0-9]{0,14}+),"node":"(?P<node1>'
            + _TEXT
            + rb'*+)"\}(?P<more>(?:,'
            + _PREDECESSOR
            + rb")*+)\]",
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


_DEPENDENCIES, _START, _COMPLETE = 0, 1, 2
"""What a lane pattern is for (the loop's branch)."""
_NAMES = ("dependencies-satisfied", "work-started", "work-completed")


_DIGEST: Final = b',"digest":"'
_REQUEST: Final = b',"request":"'
_REQUEST_DIGEST: Final = b',"request_digest":"'


def _kept(line: bytes) -> tuple[Digest, str, Digest]:
    """A line the lane accepted: its own digest, request id and request digest.

    What ``flush`` hands to the chain and the replay state, read again from
    the line rather than kept for every event. The line's strings hold no
    quote (``_TEXT``), so each member's key occurs once, where the member is.
    """
    start = line.index(_DIGEST) + len(_DIGEST)
    own = line[start : line.index(b'"', start)].decode()
    start = line.index(_REQUEST, start) + len(_REQUEST)
    ask = line[start : line.index(b'"', start)].decode()
    start = line.index(_REQUEST_DIGEST, start) + len(_REQUEST_DIGEST)
    return Digest(own), ask, Digest(line[start : line.index(b'"', start)].decode())


def _current_upstream(
    preds: list[tuple[Any, int]],
    upstream: frozenset[str],
    activations: dict[Key, ActivationState],
    latest: dict[NodeId, int],
) -> bool:
    """Whether each predecessor is a current completion of an upstream node, none named twice."""
    for index, pred in enumerate(preds):
        source = pred[0]
        if source is None or source not in upstream or (index and pred in preds[:index]):
            return False
        found = activations.get(pred)
        if found is None or found.state is not _COMPLETED or latest.get(source) != pred[1]:
            return False
    return True


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
        kinds = {
            "dependencies-satisfied": _DEPENDENCIES,
            "work-started": _START,
            "work-completed": _COMPLETE,
        }
        # The line's last bytes (with or without its newline) -> (fullmatch, which
        # branch of ``run``): the transition is the last member, and these tails
        # tell the three apart (the pattern then spells the transition out).
        self.patterns: dict[bytes, tuple[Any, int]] = {}
        for name, pattern in patterns.items():
            tail = name.encode()[-_TAIL_BYTES + 2 :] + b'"}'
            self.patterns[tail] = self.patterns[tail[1:] + b"\n"] = (pattern.fullmatch, kinds[name])
        self.nodes: dict[bytes, NodeId] = {nid.encode(): NodeId(nid) for nid in state.rules}
        self.limits = {nid: node.max_visits for nid, node in graph.nodes.items()}
        # Nodes whose Host start the lane decides (a human step is the generic path's).
        self.startable = frozenset(
            nid for nid, rule in state.rules.items() if _STARTED not in rule.human_steps
        )
        # Nodes whose Host completion the lane decides: action and operation nodes
        # (the kinds with an output record) with no human step, conduct or approval.
        outputs = [
            nid for nid, node in graph.nodes.items() if isinstance(node, ActionNode | OperationNode)
        ]
        self.completable = frozenset(
            nid
            for nid in outputs
            if _DONE not in state.rules[nid].human_steps
            and not state.rules[nid].needs_conduct
            and state.rules[nid].decl.approval is None
        )
        # Nodes that declare no artifact a completion must reference.
        self.bare = frozenset(nid for nid, rule in state.rules.items() if not rule.outputs)
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
        self.ints: dict[bytes, int] = {}
        # Every request id the replay state knows, as the bytes a line spells it.
        # The lane's own reach the state's table only when a generic step follows
        # (``flush``): a journal the lane reads to its end never builds them.
        self.asked: set[bytes] = {ask.encode() for ask in state.requests}
        self.lines: list[bytes] = []
        self.head = chain.head[7:].encode()
        self.first = 1
        """The first position accepted since the last flush."""
        self.position = 0
        """The last position the lane accepted (0: none since the last flush)."""

    def flush(self, *, final: bool = False) -> None:
        """Hand what the lane accepted to the chain, state and report (before any generic step).

        ``final``: no event follows, so neither the chain's digest table (which
        only tells a duplicate from a gap in a later event) nor the replay
        state's request table (which only a later event consults) is filled in.
        """
        if not self.position:
            return
        if not final:
            seen, requests, lines = self.chain.seen, self.state.requests, self.lines
            for ordinal in range(self.first, self.position + 1):
                own, ask, digest = _kept(lines[ordinal])
                seen[own] = ordinal
                requests[ask] = (digest, ordinal, ordinal)
        head = Digest("sha256:" + self.head.decode())
        self.chain.resume(head, self.position)
        self.state.head = head
        self.report.events, self.report.head = self.position, head
        self.first = self.position + 1
        self.position = 0

    def resync(self, request: str) -> None:
        """Take the chain's head and ``request`` (its id) after a generic step."""
        self.asked.add(request.encode())
        self.head = self.chain.head[7:].encode()
        self.first = self.chain.count + 1

    def run(self, lines: list[bytes], position: int) -> int:
        """Accept and fold in the events from ``lines[position]`` on, one by one.

        Returns the position of the first event the lane leaves to the generic
        path (``len(lines)`` when it accepted them all); nothing of that event
        has been changed. One loop with everything it reads bound to locals:
        per event, the lane costs about what the line's match and hash do.
        """
        state, rules = self.state, self.rules
        # Only a generic step opens a batch or completes a terminal node, so
        # neither can change while the lane accepts.
        if state.batch is not None or rules.terminal is not None:
            return position
        patterns, nodes, limits, plain = self.patterns, self.nodes, self.limits, self.plain
        startable, completable, bare = self.startable, self.completable, self.bare
        activations, latest, retired = state.activations, state.latest, state.retired
        node_rules, start_node = state.rules, state.header.start
        asked = self.asked
        self.lines = lines
        load, graph_nodes, completed = rules.load, rules.graph.nodes, rules.completed_refs
        references, path = self.references, self.report.path
        sha256 = hashlib.sha256
        # A count's digits -> its value (int() of bytes costs more than a look-up).
        ints = self.ints
        head = self.head
        accepted = self.position
        count = len(lines)
        while position < count:
            line = lines[position]
            found = patterns.get(line[-_TAIL_BYTES:])
            if found is None:
                break
            match = found[0](line)
            if match is None:
                break
            kind = found[1]
            groups = match.groups()
            if kind == _DEPENDENCIES:
                low, activation, actor, stated, high, name, ordinal = groups[:7]
                first, name1, more, prior, request = groups[7:]
            else:
                low, activation, actor, attempt, sequence, stated, high, name = groups[:8]
                ordinal, prior, refs, request = groups[8:]
            # The chain and the digest. The match has proven the canonical form
            # and the schema (an ASCII line with no control byte, backslash or DEL
            # once ``prior`` and the digest are known to be hex: see ``_TEXT``).
            if prior != head or int(ordinal) != position:
                break
            hasher = sha256(low)
            hasher.update(high)
            if hasher.hexdigest().encode() != stated:
                break
            node = nodes.get(name)
            if node is None:
                break
            number = ints.get(activation)
            if number is None:
                number = ints[activation] = int(activation)
            key = (node, number)
            record = activations.get(key)
            if request in asked:
                break

            if kind == _DEPENDENCIES:
                limit = limits[node]
                if record is None:
                    # _check_activation, then state_of is pending (not the start node's
                    # next activation, which is ready), then max_visits for one more visit.
                    last = latest.get(node, 0)
                    if number != last + 1 or (
                        last and activations[(node, last)].state in LIVE_STATES
                    ):
                        break
                    gone = retired.get(node, 0)
                    if node == start_node and gone == last:
                        break
                    if limit is not None and last - gone + 1 > limit:
                        break
                elif record.state is not _PENDING or (
                    limit is not None and latest.get(node, 0) - retired.get(node, 0) > limit
                ):
                    break
                after = ints.get(first)
                if after is None:
                    after = ints[first] = int(first)
                source = nodes.get(name1)
                preds = [(source, after)]
                if more:
                    preds.extend((nodes.get(n), int(a)) for a, n in _PREDECESSORS(more))
                    if not _current_upstream(preds, node_rules[node].upstream, activations, latest):
                        break
                else:  # _current_upstream for one predecessor, inline
                    found_pred = activations.get(preds[0])  # type: ignore[arg-type]
                    if (
                        source is None
                        or source not in node_rules[node].upstream
                        or found_pred is None
                        or found_pred.state is not _COMPLETED
                        or latest.get(source) != after
                    ):
                        break
                if more:
                    consult = any((pred[0], node) not in plain for pred in preds)
                else:
                    consult = (preds[0][0], node) not in plain
                if consult:
                    try:
                        rules._dependencies(
                            state,
                            key,
                            [{"node": p[0], "activation": p[1]} for p in preds],
                            position,
                        )
                    except ExecsysError:
                        break  # a graph rule refuses: the generic path words it
                # Fold in (ReplayState.apply for this transition).
                if record is None:
                    record = ActivationState(_READY, position, (), [], [], [])
                    activations[key] = record
                    latest[node] = number
                record.state = _READY
                record.predecessors = tuple(preds)  # type: ignore[arg-type]
                for pred in preds:
                    activations[pred].dependents.append(key)  # type: ignore[index]

            elif kind == _START:
                if node not in startable:
                    break
                if record is None:
                    # Only the start node's next activation is ready without an event.
                    last = latest.get(node, 0)
                    gone = retired.get(node, 0)
                    limit = limits[node]
                    if (
                        node != start_node
                        or number != last + 1
                        or gone != last
                        or (last and activations[(node, last)].state in LIVE_STATES)
                        or (limit is not None and last - gone + 1 > limit)
                    ):
                        break
                    attempts: list[AttemptState] = []
                elif record.state is not _READY:
                    break
                else:
                    attempts = record.attempts
                ident = attempt.decode()
                step = ints.get(sequence)
                if step is None:
                    step = ints[sequence] = int(sequence)
                if step != len(attempts) + 1 or (
                    attempts and any(old.id == ident for old in attempts)
                ):
                    break
                if record is None:
                    record = ActivationState(_ACTIVE, position, (), [], [], [])
                    activations[key] = record
                    latest[node] = number
                record.state = _ACTIVE
                record.attempts.append(AttemptState(ident, step, position))
                if refs:  # a launch record, say: only listed (note_references)
                    for digest, _ident, _kind in _REFS(refs):
                        references.setdefault(digest.decode())

            else:
                if node not in completable:
                    break
                if record is None or record.state is not _ACTIVE or not record.attempts:
                    break
                current = record.attempts[-1]
                if (
                    current.outcome is not None
                    or current.id != attempt.decode()
                    or current.sequence != int(sequence)
                ):
                    break
                visit_name = name + b"#" + activation
                visit = visit_name.decode()
                tail = b'","id":"' + visit_name + b'","kind":"output"}'
                if len(refs) == _REF_HEAD + len(tail) and refs.endswith(tail) and node in bare:
                    # Exactly one reference, the output record (the length leaves
                    # no room for another), and the node declares no artifact.
                    output = refs[_DIGEST_AT:_REF_HEAD].decode()
                    given = [(output, visit, "output")]
                else:
                    given = []
                    kinds: dict[tuple[str, str], str] = {}
                    for digest_, ident_, kind_ in _REFS(refs):
                        entry = (digest_.decode(), ident_.decode(), kind_.decode())
                        given.append(entry)
                        kinds[(entry[2], entry[1])] = entry[0]
                    if not node_rules[node].outputs <= kinds.keys():
                        break
                    found_output = kinds.get(("output", visit))
                    if found_output is None:
                        break
                    output = found_output
                if load is not None:
                    try:
                        rules._ports(graph_nodes[node], key, load(output, position), position)
                    except ExecsysError:
                        break  # a record missing, mis-hashed or off its schema
                record.state = _COMPLETED
                current.outcome = _COMPLETED
                current.ended = position
                for digest, _ident, kind_ in given:
                    if load is not None:  # only records are read through it
                        completed[(key, kind_)] = digest
                    references.setdefault(digest)
                path.append(visit)

            record.events.append(position)
            asked.add(request)
            if actor != _HOST:
                self._directive(_NAMES[kind], key, actor, position, line)
            head = stated
            accepted = position
            position += 1
        self.head = head
        self.position = accepted
        if accepted:
            state.count = accepted
        return position

    def _directive(
        self, transition: str, key: tuple[str, int], actor: bytes, ordinal: int, line: bytes
    ) -> None:
        """The directive entry ``_summarise`` writes for an event not asked for by the Host."""
        self.report.directives.append(
            {
                "ordinal": ordinal,
                "transition": transition,
                "node": key[0],
                "activation": key[1],
                "actor": actor.decode(),
                "rationale": loads_json(line)["rationale"],
            }
        )
