"""The cyclic garbage collector's setting for an ``execsys`` process that drives deliveries.

A long delivery keeps the collector busy: LangGraph copies a small map per node
at every step, and those containers reach the collector's young generation
faster as the delivery grows. At Python's threshold of 700 that meant about 790
young, 70 middle and 3-4 full collections per 1,000-step delivery, the full ones
walking the whole heap (imported modules, the compiled graph): about 0.38 s of
CPU, two thirds of it in the full collections (docs/performance.md, "The
collector's threshold for the command-line process").

A command that drives deliveries raises the young generation's threshold to
:data:`YOUNG_THRESHOLD`. Reference counting still frees every object that is not
part of a cycle at once; only cyclic garbage waits longer, at most that many
container allocations. The setting is process-wide, so it is made here, by the
command-line process, and never by the Host, which is a library inside other
processes too.

``gc.freeze()`` was measured beside it and not adopted: at the point this layer
can reach (before the Host imports LangGraph and compiles the graph, lazily) it
froze about 32,000 of 170,000 objects and changed nothing measurable (decision
0135).

``EXECSYS_GC=default`` leaves the collector as Python sets it, for comparison.
"""

from __future__ import annotations

import argparse
import gc
import os

ENV = "EXECSYS_GC"
"""The opt-out: ``EXECSYS_GC=default`` keeps Python's own thresholds."""

YOUNG_THRESHOLD = 10_000
"""Container allocations (net of frees) between two young collections; Python's is 700."""

DRIVING = frozenset({"run", "input", "resolve", "recover", "serve", "demo"})
"""Commands that run a delivery's steps in this process."""

DRIVING_GOAL = frozenset({"start", "resume"})
"""``goal`` subcommands that run the goal's deliveries in this process."""


def drives_deliveries(args: argparse.Namespace) -> bool:
    """Whether the parsed command runs delivery steps in this process.

    Reading commands (``status``, ``inspect``, ``journal``, ``audit``, the
    console) and those that only admit, queue or stop (``submit``, ``stop``,
    ``retire``) keep Python's setting: they allocate little per unit of work.
    """
    command = getattr(args, "command", None)
    if command == "goal":
        return getattr(args, "goal_command", None) in DRIVING_GOAL
    return command in DRIVING


def tune_collector(args: argparse.Namespace) -> bool:
    """Raise the young generation's threshold for a driving command; True if it did.

    Called once, before the command's handler, so that every collection of the
    process sees it. Idempotent; the older generations keep their thresholds
    (10 and 10), so a middle collection still follows every tenth young one.
    """
    if os.environ.get(ENV) == "default" or not drives_deliveries(args):
        return False
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    return True
