"""Goal rows on the Host's store: the versioned records an application keeps beside deliveries.

CodeClosure keeps each goal here: a document written once, a state and the
delivery carrying it out, moved only by compare-and-set on a version, plus a
log of notes. The Host gives the document and the state no meaning and never
reads them; it only makes the rows durable in the same store as the
deliveries, on whichever backend the store is, through the storage port.
"""

from __future__ import annotations

from host.storage import GoalRow, Storage


class GoalTable:
    """The goal rows of one Host's store (``CoordinatorHost.goals``)."""

    def __init__(self, store: Storage) -> None:
        self._store = store

    def insert(self, goal: str, document: bytes, state: str) -> GoalRow:
        """Store a new goal at version 1 in one transaction; return its row."""
        with self._store.transaction() as tx:
            tx.insert_goal(goal, document, state)
        row = self._store.goal(goal)
        assert row is not None, "a committed goal is readable"
        return row

    def get(self, goal: str) -> GoalRow | None:
        """The goal's row, or None when there is no such goal."""
        return self._store.goal(goal)

    def advance(self, goal: str, expected: int, *, state: str, delivery: str | None = None) -> bool:
        """Move the goal to ``state`` (and ``delivery``) only if it is at version ``expected``.

        The version goes up by one. False, with nothing written, when the goal is
        at another version (or does not exist): the caller read a stale row.
        """
        with self._store.transaction() as tx:
            return tx.advance_goal(goal, expected, state, delivery)

    def note(self, goal: str, text: str) -> None:
        """Append a note to the goal's log."""
        with self._store.transaction() as tx:
            tx.add_goal_note(goal, text)

    def notes(self, goal: str) -> list[str]:
        """The goal's notes, oldest first."""
        return self._store.goal_notes(goal)

    def rows(self) -> list[GoalRow]:
        """Every goal, newest first."""
        return self._store.goals()
