"""The substrate port: what the Host core needs from the engine that runs a thread.

The core owns every rule (what a step does, when it commits, what a directive
changes); a substrate only keeps a delivery's private durable thread: it runs
the core's step handler for each scheduled node until nothing is scheduled,
checkpointing each super-step through the Host's storage, and it reads or
forks the thread's state. ``host.langgraph`` implements it on LangGraph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from contracts import AdmittedDelivery, ControlGraph, ExecsysError
from host._context import CompiledGraphInfo, DeliveryContext


@dataclass(frozen=True)
class ThreadSnapshot:
    """A delivery thread's committed state."""

    values: dict[str, Any]
    """The thread's channel values (JSON-native)."""
    tasks: tuple[str, ...]
    """Nodes the substrate still has work for from an interrupted step, sorted."""


class Substrate(Protocol):
    """Drives, reads and forks delivery threads."""

    @property
    def compiles(self) -> int:
        """How many graphs were compiled so far."""
        ...

    def info(self, graph: ControlGraph) -> CompiledGraphInfo:
        """The per-graph facts the step handlers use (compiling the graph on first use)."""
        ...

    async def snapshot(
        self, delivery: AdmittedDelivery, checkpoint: str | None = None
    ) -> ThreadSnapshot:
        """The thread's latest state, or its state at ``checkpoint``."""
        ...

    async def values(self, delivery: AdmittedDelivery) -> dict[str, Any]:
        """The latest state's channel values (``snapshot(delivery).values``, maybe cheaper)."""
        ...

    async def run(
        self, delivery: AdmittedDelivery, first: dict[str, Any], token: int, ctx: DeliveryContext
    ) -> None:
        """Apply ``first`` and run the thread until nothing is scheduled.

        Every checkpoint is written under fencing token ``token``.
        """
        ...

    async def update(
        self,
        delivery: AdmittedDelivery,
        update: dict[str, Any],
        token: int,
        checkpoint: str | None = None,
    ) -> None:
        """Commit ``update`` as a step of the start node, without running anything.

        With ``checkpoint``, the update forks the thread from that checkpoint.
        """
        ...

    def error(self, exc: BaseException, delivery: str) -> ExecsysError:
        """The catalogued error for an exception that escaped :meth:`run`."""
        ...
