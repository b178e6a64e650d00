"""Read-only views derived from replay; never persisted, never authority."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from contracts._ids import Digest, NodeId
from contracts._journal import NodeState
from host.journal._state import Key, ReplayState


@dataclass(frozen=True, slots=True)
class AttemptView:
    """One attempt of one activation."""

    id: str
    """The attempt id."""
    sequence: int
    """1-based position among the activation's attempts."""
    started: int
    """Ordinal of its work-started event."""
    outcome: NodeState | None
    """completed, failed or invalidated; None while in progress."""
    ended: int | None
    """Ordinal of the event that closed it; None while in progress."""


@dataclass(frozen=True, slots=True)
class ActivationView:
    """One activation of one node."""

    node: NodeId
    """The node."""
    activation: int
    """The activation number."""
    state: NodeState
    """Current state."""
    predecessors: tuple[Key, ...]
    """The activations whose completion made this one ready."""
    attempts: tuple[AttemptView, ...]
    """Every attempt, failed ones included, in order."""
    events: tuple[int, ...]
    """Ordinals of the events that moved this activation."""


@dataclass(frozen=True, slots=True)
class Projection:
    """Current states, activations and attempt history of one journal."""

    execution: str
    """The execution id."""
    head: Digest
    """Digest of the last record."""
    events: int
    """Number of events."""
    activations: Mapping[Key, ActivationView]
    """Every activation that exists, by ``(node, activation)``."""
    current: Mapping[NodeId, int]
    """Each node's latest activation number (nodes never activated are absent)."""

    def state(self, node: NodeId, activation: int | None = None) -> NodeState:
        """State of ``node``'s given (default: latest) activation; pending if it has none."""
        number = self.current.get(node, 1) if activation is None else activation
        view = self.activations.get((node, number))
        return view.state if view is not None else NodeState.PENDING


def project(state: ReplayState) -> Projection:
    """Snapshot ``state`` as an immutable :class:`Projection`."""
    views = {
        key: ActivationView(
            node=key[0],
            activation=key[1],
            state=record.state,
            predecessors=record.predecessors,
            attempts=tuple(
                AttemptView(a.id, a.sequence, a.started, a.outcome, a.ended)
                for a in record.attempts
            ),
            events=tuple(record.events),
        )
        for key, record in state.activations.items()
    }
    return Projection(
        execution=state.header.execution,
        head=state.head,
        events=state.count,
        activations=MappingProxyType(views),
        current=MappingProxyType(dict(state.latest)),
    )
