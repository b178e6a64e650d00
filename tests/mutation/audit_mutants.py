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
        "            or match.group(prior) != self.head\n",
        "",
        LANE,
    ),
    Mutant(
        "lane-ordinal-unchecked",
        "the lane accepts a line out of place",
        LANE_PY,
        "            or int(match.group(ordinal)) != position\n",
        "",
        LANE,
    ),
    Mutant(
        "lane-unsafe-bytes",
        "the lane accepts a line with control bytes or escapes",
        LANE_PY,
        "        if len(line.translate(None, UNSAFE)) != end:",
        "        if False:",
        LANE,
    ),
    Mutant(
        "lane-activation-skip",
        "the lane accepts a new activation that skips a number",
        LANE_PY,
        "            if number != last + 1 or (last and",
        "            if (last and",
        LANE,
    ),
    Mutant(
        "lane-predecessor-stale",
        "the lane accepts a predecessor that is not a current completion",
        LANE_PY,
        "            if found is None or found.state is not _COMPLETED or latest.get(source) "
        "!= pred[1]:",
        "            if found is None:",
        LANE,
    ),
    Mutant(
        "lane-attempt-sequence",
        "the lane accepts an attempt that skips a sequence number",
        LANE_PY,
        "        if count != len(attempts) + 1 or any(",
        "        if any(",
        LANE,
    ),
    Mutant(
        "lane-human-start",
        "the lane accepts the Host starting a human step",
        LANE_PY,
        "        if node is None or _STARTED in state.rules[node].human_steps:",
        "        if node is None:",
        LANE,
        equivalent="an admitted graph declares no human task (waits are hybrid: only their "
        "completion is a human step), and the audit requires the header's declarations",
    ),
    Mutant(
        "lane-open-attempt",
        "the lane accepts a completion of another attempt",
        LANE_PY,
        "            or current.id != attempt.decode()\n",
        "",
        LANE,
    ),
    Mutant(
        "lane-request-repeated",
        "the lane accepts a request id already recorded",
        LANE_PY,
        "        if ask in state.requests:\n            return False\n"
        "        if record is None:\n            record = ActivationState(_ACTIVE",
        "        if record is None:\n            record = ActivationState(_ACTIVE",
        LANE,
    ),
    Mutant(
        "lane-output-node-kinds",
        "the lane completes nodes other than action and operation nodes",
        LANE_PY,
        "        if node is None or node not in self.outputs:",
        "        if node is None:",
        LANE,
    ),
    Mutant(
        "lane-launch-unlisted",
        "the lane forgets the records a start references",
        LANE_PY,
        "                self.references.setdefault(digest.decode())",
        "                pass",
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
