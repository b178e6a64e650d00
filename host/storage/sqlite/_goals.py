"""The goal rows of the SQLite backend: CodeClosure's goals beside the Host's tables.

The two tables keep the layout goals had when CodeClosure wrote them over its
own connection, so a store made then reads the same now. Writes run in the
backend's transactions (one connection, one lock, ``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Protocol

from host.storage._port import GoalRow

GOAL_SCHEMA = """
CREATE TABLE IF NOT EXISTS execsys_goal_notes (
    goal TEXT NOT NULL,
    time REAL NOT NULL,
    text TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS execsys_goals (
    goal TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    document BLOB NOT NULL,
    delivery TEXT,
    state TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
"""

_COLUMNS = "goal, version, document, delivery, state, created, updated"


class _Reads(Protocol):
    def read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]: ...


def _row(r: tuple[Any, ...]) -> GoalRow:
    goal, version, document, delivery, state, created, updated = r
    return GoalRow(
        goal=str(goal),
        version=int(version),
        document=bytes(document)
        if isinstance(document, bytes | memoryview)
        else str(document).encode(),
        delivery=None if delivery is None else str(delivery),
        state=str(state),
        created=float(created),
        updated=float(updated),
    )


def _missing_table(exc: sqlite3.OperationalError) -> bool:
    """A read-only store no goal command has written yet has no goal tables."""
    return "no such table" in str(exc)


class SqliteGoalReads:
    """The goal reads of :class:`~host.storage.sqlite.SqliteStorage`."""

    def goal(self: _Reads, goal: str) -> GoalRow | None:
        """The goal's row, or None."""
        try:
            rows = self.read(f"SELECT {_COLUMNS} FROM execsys_goals WHERE goal = ?", (goal,))
        except sqlite3.OperationalError as exc:
            if _missing_table(exc):
                return None
            raise
        return _row(rows[0]) if rows else None

    def goals(self: _Reads) -> list[GoalRow]:
        """Every goal, newest first."""
        try:
            rows = self.read(f"SELECT {_COLUMNS} FROM execsys_goals ORDER BY created DESC, goal")
        except sqlite3.OperationalError as exc:
            if _missing_table(exc):
                return []
            raise
        return [_row(r) for r in rows]

    def goal_notes(self: _Reads, goal: str) -> list[str]:
        """The goal's notes, oldest first."""
        try:
            rows = self.read(
                "SELECT text FROM execsys_goal_notes WHERE goal = ? ORDER BY time, rowid", (goal,)
            )
        except sqlite3.OperationalError as exc:
            if _missing_table(exc):
                return []
            raise
        return [str(text) for (text,) in rows]


class _Cursor(Protocol):
    cur: sqlite3.Cursor


class SqliteGoalWrites:
    """The goal writes of :class:`~host.storage.sqlite.SqliteTx`."""

    def insert_goal(self: _Cursor, goal: str, document: bytes, state: str) -> None:
        """Store a new goal at version 1 (the primary key refuses a duplicate)."""
        now = time.time()
        self.cur.execute(
            "INSERT INTO execsys_goals (goal, version, document, delivery, state, created, "
            "updated) VALUES (?, 1, ?, NULL, ?, ?, ?)",
            (goal, document, state, now, now),
        )

    def advance_goal(
        self: _Cursor, goal: str, expected: int, state: str, delivery: str | None
    ) -> bool:
        """Compare-and-set on the version; whether the row moved."""
        self.cur.execute(
            "UPDATE execsys_goals SET version = version + 1, state = ?, "
            "delivery = COALESCE(?, delivery), updated = ? WHERE goal = ? AND version = ?",
            (state, delivery, time.time(), goal, expected),
        )
        return self.cur.rowcount == 1

    def add_goal_note(self: _Cursor, goal: str, text: str) -> None:
        """Append a note to the goal's log."""
        self.cur.execute(
            "INSERT INTO execsys_goal_notes (goal, time, text) VALUES (?, ?, ?)",
            (goal, time.time(), text),
        )
