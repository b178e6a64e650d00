"""The goal rows of the PostgreSQL backend: CodeClosure's goals beside the Host's tables.

Same rows as on SQLite (migration 3 creates the tables). A note's ``id``
orders notes written within the same clock tick.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

import psycopg
from psycopg.rows import DictRow

from host.storage._port import GoalRow

_COLUMNS = "goal, version, document, delivery, state, created, updated"


class _Reads(Protocol):
    def read(self, sql: Any, params: tuple[Any, ...] = ()) -> list[DictRow]: ...


def _row(r: DictRow) -> GoalRow:
    return GoalRow(
        goal=str(r["goal"]),
        version=int(r["version"]),
        document=bytes(r["document"]),
        delivery=None if r["delivery"] is None else str(r["delivery"]),
        state=str(r["state"]),
        created=float(r["created"]),
        updated=float(r["updated"]),
    )


class PostgresGoalReads:
    """The goal reads of :class:`~host.storage.postgres.PostgresStorage`."""

    def goal(self: _Reads, goal: str) -> GoalRow | None:
        """The goal's row, or None."""
        rows = self.read(f"SELECT {_COLUMNS} FROM execsys_goals WHERE goal = %s", (goal,))
        return _row(rows[0]) if rows else None

    def goals(self: _Reads) -> list[GoalRow]:
        """Every goal, newest first."""
        rows = self.read(f"SELECT {_COLUMNS} FROM execsys_goals ORDER BY created DESC, goal")
        return [_row(r) for r in rows]

    def goal_notes(self: _Reads, goal: str) -> list[str]:
        """The goal's notes, oldest first."""
        rows = self.read(
            "SELECT text FROM execsys_goal_notes WHERE goal = %s ORDER BY time, id", (goal,)
        )
        return [str(r["text"]) for r in rows]


class _Cursor(Protocol):
    cur: psycopg.Cursor[DictRow]


def _execute(tx: _Cursor, sql: str, params: Sequence[Any]) -> int:
    return tx.cur.execute(sql, params).rowcount


class PostgresGoalWrites:
    """The goal writes of :class:`~host.storage.postgres.PostgresTx`."""

    def insert_goal(self: _Cursor, goal: str, document: bytes, state: str) -> None:
        """Store a new goal at version 1 (the primary key refuses a duplicate)."""
        now = time.time()
        _execute(
            self,
            "INSERT INTO execsys_goals (goal, version, document, delivery, state, created, "
            "updated) VALUES (%s, 1, %s, NULL, %s, %s, %s)",
            (goal, document, state, now, now),
        )

    def advance_goal(
        self: _Cursor, goal: str, expected: int, state: str, delivery: str | None
    ) -> bool:
        """Compare-and-set on the version; whether the row moved."""
        changed = _execute(
            self,
            "UPDATE execsys_goals SET version = version + 1, state = %s, "
            "delivery = COALESCE(%s, delivery), updated = %s WHERE goal = %s AND version = %s",
            (state, delivery, time.time(), goal, expected),
        )
        return changed == 1

    def add_goal_note(self: _Cursor, goal: str, text: str) -> None:
        """Append a note to the goal's log."""
        _execute(
            self,
            "INSERT INTO execsys_goal_notes (goal, time, text) VALUES (%s, %s, %s)",
            (goal, time.time(), text),
        )
