"""Delivery status and the reports the Host gives about a delivery."""

from __future__ import annotations

from enum import StrEnum, unique
from typing import Any

from pydantic import BaseModel, ConfigDict

from contracts._ids import CorrelationId, DeliveryId, NodeId


@unique
class DeliveryStatus(StrEnum):
    """The one closed set of delivery statuses."""

    QUEUED = "queued"
    RUNNING = "running"
    SUSPENDED = "suspended"
    WAITING = "waiting"
    INTERVENTION = "intervention"
    STOPPED = "stopped"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RETIRED = "retired"

    @property
    def terminal(self) -> bool:
        """Whether no further work can happen without retirement."""
        return self in _TERMINAL


_S = DeliveryStatus

_TERMINAL = frozenset({_S.COMPLETED, _S.FAILED, _S.CANCELLED, _S.RETIRED})

# The named subsets the Host's rules use; each is written once, here.
ENDED = _TERMINAL
"""No further work can happen (a stop, a cancel or a continue no longer applies)."""
FINISHED = frozenset({_S.COMPLETED, _S.FAILED, _S.CANCELLED})
"""Ended and not yet retired: an attempt started for it never runs."""
HALTED = ENDED | {_S.STOPPED, _S.INTERVENTION}
"""No step runs: a step of a halted delivery only abandons what it started."""
NEEDS_DIRECTIVE = frozenset({_S.STOPPED, _S.INTERVENTION})
"""Only an operator's directive moves the delivery on."""
NOT_RUNNABLE = FINISHED | NEEDS_DIRECTIVE
"""An answer or a resolution is refused."""
RETIRABLE = FINISHED | {_S.STOPPED}
"""Retirement is allowed."""
AT_REST = frozenset({_S.SUSPENDED, _S.WAITING})
"""Stopped at a suspension or a wait: the status row, checkpoint, journal and custody
savepoint that put it there committed together, and nothing moves custody until an
answer or a resolution first commits ``running``."""


@unique
class RecoveryDirective(StrEnum):
    """The closed set of recovery directives an operator may issue."""

    CONTINUE = "continue"
    RESTART_FROM_SAVEPOINT = "restart-from-savepoint"
    INTERVENE = "intervene"


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class SuspensionView(_Frozen):
    """A pending action-input question."""

    correlation: CorrelationId
    """The correlation id an answer must quote."""
    node: NodeId
    """The suspended action node."""
    question: Any
    """What the executor asked."""


class WaitView(_Frozen):
    """A pending workflow wait."""

    node: NodeId
    """The wait node."""
    kind: str
    """approval | decision | workflow-result."""


class StatusReport(_Frozen):
    """What ``execsys run`` and ``execsys status DELIVERY`` report."""

    delivery: DeliveryId
    """The delivery id."""
    graph: str
    """The graph name."""
    status: DeliveryStatus
    """Current status."""
    outcome: str | None = None
    """Terminal outcome (succeeded/failed/blocked) or the failure code."""
    suspension: SuspensionView | None = None
    """The first pending action-input question, if any."""
    suspensions: tuple[SuspensionView, ...] = ()
    """Every pending action-input question."""
    wait: WaitView | None = None
    """The pending workflow wait, if any."""
    message: str = ""
    """One line saying what happened last."""
    updated: str = ""
    """ISO-8601 time of the last change."""

    def public(self) -> dict[str, Any]:
        """The ``--json`` shape of ``run``."""
        return {
            "delivery": self.delivery,
            "status": self.status.value,
            "outcome": self.outcome,
            "suspension": self.suspension.model_dump(mode="json") if self.suspension else None,
            "wait": self.wait.model_dump(mode="json") if self.wait else None,
            "message": self.message,
        }
