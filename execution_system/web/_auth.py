"""Who may do what: one table from role to actions, checked in one place."""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from enum import StrEnum, unique

from contracts import ErrorCode, error
from execution_system.web._tokens import Role, TokenEntry


@unique
class Action(StrEnum):
    """Everything the API and the console let a caller do."""

    STATUS = "status"
    """Read one delivery's status."""
    READ = "read"
    """Read everything else: listings, inspection, journals, graphs, goals, events."""
    ADMIT = "admit"
    ANSWER = "answer"
    RESOLVE = "resolve"
    RECOVER = "recover"
    STOP = "stop"
    RETIRE = "retire"


ROLE_ACTIONS: dict[Role, frozenset[Action]] = {
    Role.VIEWER: frozenset({Action.STATUS, Action.READ}),
    Role.OPERATOR: frozenset(
        {Action.STATUS, Action.READ, Action.ADMIT, Action.RECOVER, Action.STOP, Action.RETIRE}
    ),
    Role.APPROVER: frozenset({Action.STATUS, Action.READ, Action.RESOLVE}),
    Role.AGENT: frozenset({Action.STATUS, Action.ANSWER}),
}
"""The whole authorization policy of the web layer (the Host's authority policy still decides
who may resolve a wait)."""


@dataclass(frozen=True)
class Principal:
    """The caller of one request."""

    actor: str
    """Who acts; passed to the Host on every mutating call."""
    role: str
    """A :class:`Role` value, or ``local`` when no tokens file is used (loopback only)."""
    actions: frozenset[Action]
    """What the caller may do."""
    deliveries: frozenset[str] | None = None
    """The deliveries the caller is limited to; None means all."""

    def may(self, action: Action, delivery: str | None = None) -> bool:
        """Whether the caller may do ``action`` (on ``delivery``)."""
        if action not in self.actions:
            return False
        if self.deliveries is None:
            return True
        return delivery is not None and delivery in self.deliveries

    def require(self, action: Action, delivery: str | None = None) -> None:
        """Refuse with AUTH_FORBIDDEN unless the caller may do ``action``."""
        if not self.may(action, delivery):
            where = f" on {delivery}" if delivery else ""
            raise error(
                ErrorCode.AUTH_FORBIDDEN,
                f"{self.role} {self.actor!r} may not {action.value}{where}",
                path=delivery or action.value,
                expected="a token whose role allows it",
            )


def from_entry(entry: TokenEntry) -> Principal:
    """The principal a token stands for."""
    scope = frozenset(entry.deliveries) if entry.role is Role.AGENT else None
    return Principal(entry.actor, entry.role.value, ROLE_ACTIONS[entry.role], scope)


def local_principal() -> Principal:
    """Without a tokens file (loopback only) the caller is the local user, with every right."""
    try:
        actor = getpass.getuser()
    except (KeyError, OSError):
        actor = "operator"
    return Principal(actor, "local", frozenset(Action))
