"""Mutants of the audit's fast lane (``host/journal/_audit_lane.py``) and its strict schema.

Each one makes the lane accept an event the generic path refuses (or refuse to
see what it must note); ``tests/audit/test_lane.py`` compares the two paths on
forgeries and must kill every one. Kept apart from ``mutants.py`` for size.
"""

from __future__ import annotations

from tests.mutation.mutant import Mutant

LANE_PY = "host/journal/_audit_lane.py"
AUDIT_PY = "host/journal/_audit.py"
LANE = ("tests/audit/test_lane.py",)
STRICT = ("tests/audit/test_strict_counts.py",)

AUDIT_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "lane-prior-unchecked",
        "the lane accepts a line whose prior is not the previous digest",
        LANE_PY,
        "            if prior != head or int(ordinal) != position:",
        "            if int(ordinal) != position:",
        LANE,
    ),
    Mutant(
        "lane-ordinal-unchecked",
        "the lane accepts a line out of place",
        LANE_PY,
        "            if prior != head or int(ordinal) != position:",
        "            if prior != head:",
        LANE,
    ),
    Mutant(
        "lane-unsafe-bytes",
        "the lane accepts a line with control bytes or escapes",
        LANE_PY,
        '_TEXT = rb"[ !#-\\[\\]-~]"',
        "_TEXT = rb'[^\"]'",
        LANE,
    ),
    Mutant(
        "lane-unsafe-execution",
        "the lane spells an execution id with control bytes into its patterns",
        LANE_PY,
        "    if _TEXTS(name) is None:\n        return {}\n",
        "",
        LANE,
    ),
    Mutant(
        "lane-activation-skip",
        "the lane accepts a new activation that skips a number",
        LANE_PY,
        "                    if number != last + 1 or (\n",
        "                    if (\n",
        LANE,
    ),
    Mutant(
        "lane-predecessor-stale",
        "the lane accepts a predecessor that is not a current completion",
        LANE_PY,
        "        if found is None or found.state is not _COMPLETED or latest.get(source) "
        "!= pred[1]:",
        "        if found is None:",
        LANE,
    ),
    Mutant(
        "lane-attempt-sequence",
        "the lane accepts an attempt that skips a sequence number",
        LANE_PY,
        "                if step != len(attempts) + 1 or (",
        "                if (",
        LANE,
    ),
    Mutant(
        "lane-human-start",
        "the lane accepts the Host starting a human step",
        LANE_PY,
        "            nid for nid, rule in state.rules.items() if _STARTED not in "
        "rule.human_steps\n",
        "            nid for nid, rule in state.rules.items()\n",
        LANE,
        equivalent="an admitted graph declares no human task (waits are hybrid: only their "
        "completion is a human step), and the audit requires the header's declarations",
    ),
    Mutant(
        "lane-open-attempt",
        "the lane accepts a completion of another attempt",
        LANE_PY,
        "                    or current.id != attempt.decode()\n",
        "",
        LANE,
    ),
    Mutant(
        "lane-request-repeated",
        "the lane accepts a request id already recorded",
        LANE_PY,
        "            if request in asked:\n                break\n",
        "",
        LANE,
    ),
    Mutant(
        "lane-generic-request-forgotten",
        "the lane forgets the request ids the generic path folded in",
        LANE_PY,
        "        self.asked.add(request.encode())\n",
        "",
        LANE,
    ),
    Mutant(
        "lane-requests-not-handed-over",
        "a flush before a generic step leaves the lane's request ids out of the replay state",
        LANE_PY,
        "                requests[ask] = (digest, ordinal, ordinal)\n",
        "                pass\n",
        LANE,
    ),
    Mutant(
        "lane-output-node-kinds",
        "the lane completes nodes other than action and operation nodes",
        LANE_PY,
        "            nid for nid, node in graph.nodes.items() if isinstance(node, ActionNode | "
        "OperationNode)\n",
        "            nid for nid, node in graph.nodes.items()\n",
        LANE,
    ),
    Mutant(
        "lane-launch-unlisted",
        "the lane forgets the records a start references",
        LANE_PY,
        "                        references.setdefault(digest.decode())",
        "                        pass",
        LANE,
    ),
    Mutant(
        "lane-one-reference",
        "the lane reads a completion with several references as if it had only its output",
        LANE_PY,
        "                if len(refs) == _REF_HEAD + len(tail) and refs.endswith(tail)",
        "                if refs.endswith(tail)",
        LANE,
    ),
    Mutant(
        "audit-schema-lax",
        'the audit\'s schema fallback lets true, "1" and 1.0 pass as counts',
        AUDIT_PY,
        "        _VALIDATE_EVENT(dumps_canonical(members), strict=True)",
        "        _VALIDATE_EVENT(dumps_canonical(members), strict=False)",
        STRICT,
    ),
)
