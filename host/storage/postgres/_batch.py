"""A step's writes as one statement: every write of the transaction in one ``WITH`` query.

A step's commit on PostgreSQL is a fencing check and about eight writes that
read nothing back. Sent one by one, even in a pipeline, each costs the client
its own execution (parameter conversion, protocol messages, a result to read),
plus BEGIN and COMMIT. :class:`StatementBatch` stands in for the cursor of such
a transaction: it keeps each statement and its parameters, and
:meth:`StatementBatch.combined` joins them into one statement, each a
common table expression of a single query, sent on an autocommit connection.
One statement is one transaction: it applies whole or not at all, and an
error in any part (a stale token, a taken journal ordinal) undoes every part
(decision 0146).

Data-modifying expressions always run to completion; a ``SELECT`` expression
runs only if the main query reads it, so the main query counts the rows of
every one of them (the fencing check and ``pg_notify`` are such). All parts
see the same snapshot and none sees another's effects: a step writes each row
at most once. A statement the batch cannot combine (not a plain
``INSERT``/``UPDATE``/``DELETE``/``SELECT``, or a second write of one table,
which could touch one row twice) and any read of a result turn
:class:`StepCursor` into an ordinary transaction: it begins one, replays what
it kept, and goes on statement by statement (the journal's first load after a
restart reads the stored lines in the step's transaction, for instance).
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import DictRow
from psycopg.types.array import ListBinaryDumper

_NAME = re.compile(r"(\w+)\s+AS\s*\(", re.IGNORECASE)
_TABLE = re.compile(r"^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"%(.)")


class _BinaryList(list[Any]):
    """A list a raw cursor sends in binary, as a ``%b`` placeholder asks."""


# A class with only a binary dumper registered is sent in binary where no format
# is asked for (psycopg picks the last dumper registered for that case).
psycopg.adapters.register_dumper(_BinaryList, ListBinaryDumper)


FALLBACKS: Counter[str] = Counter()
"""Since this process started: how often a step transaction became an ordinary one, by cause
(``read``, ``statement``, ``executemany``). Correct either way, but each costs the speed the
one-statement commit exists for; the tests hold the Host's own step path at zero."""


class NotCombinable(ValueError):
    """A statement that cannot be one part of the combined statement."""


class StatementBatch:
    """A cursor that keeps statements instead of sending them (see the module docstring)."""

    def __init__(self) -> None:
        self.parts: list[tuple[str, Sequence[Any]]] = []
        """Each statement as given, with its parameters, in order."""
        self._shapes: list[_Shape] = []
        self._tables: set[str] = set()
        self._names: set[str] = set()

    def execute(self, query: Any, params: Sequence[Any] = ()) -> StatementBatch:
        """Keep one statement that reads nothing back."""
        text = query.decode() if isinstance(query, bytes) else str(query)
        shape = _shape(text)
        if shape.table is not None:
            if shape.table in self._tables:
                raise NotCombinable(f"two writes of {shape.table} in one statement")
            self._tables.add(shape.table)
        if shape.names & self._names:
            raise NotCombinable(f"expression names used twice: {sorted(shape.names & self._names)}")
        if len(params) != shape.placeholders:
            raise NotCombinable(f"{len(params)} parameters for {shape.placeholders} placeholders")
        self._names |= shape.names
        self.parts.append((text, tuple(params)))
        self._shapes.append(shape)
        return self

    def combined(self) -> tuple[str, tuple[Any, ...]] | None:
        """The one statement, its placeholders numbered (``$1``...), and its parameters.

        None when nothing was kept. The text is meant for a raw cursor
        (:meth:`StepCursor.finish`): numbering the placeholders here, from each
        part's cached pieces, spares psycopg from parsing the whole statement
        on every step (it caches nothing longer than 4 kB).
        """
        if not self.parts:
            return None
        text, binary = _layout(tuple(self._shapes))
        params = tuple(p for _, given in self.parts for p in given)
        if binary:
            params = tuple(
                _BinaryList(p) if i in binary and type(p) is list else p
                for i, p in enumerate(params)
            )
        return text, params


@functools.lru_cache(maxsize=1024)
def _layout(shapes: tuple[_Shape, ...]) -> tuple[str, frozenset[int]]:
    """The combined text of statements of these shapes, and which parameters are ``%b``.

    Worked out once per sequence of shapes: a delivery's steps repeat a few.
    """
    # A data-modifying expression may only sit at the top level: a statement's
    # own WITH list moves up, before the expression of the statement itself.
    ctes, reads = [], []
    number = 0
    for i, shape in enumerate(shapes):
        if shape.hoisted:
            text, number = _numbered(shape.hoisted, number)
            ctes.append(text)
        text, number = _numbered(shape.main, number)
        ctes.append(f"s{i} AS ({text})")
        if shape.reads:
            reads.append(f"(SELECT count(*) FROM s{i})")
    kinds = "".join(shape.kinds for shape in shapes)
    binary = frozenset(i for i, kind in enumerate(kinds) if kind == "b")
    return f"WITH {', '.join(ctes)} SELECT {' + '.join(reads) or '0'}", binary


class _Shape:
    """What the batch needs of one statement's text, worked out once per distinct text."""

    __slots__ = ("hoisted", "kinds", "main", "names", "placeholders", "reads", "table")

    def __init__(self, text: str) -> None:
        if not text.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE", "SELECT", "WITH")):
            raise NotCombinable(f"not combinable into one statement: {text[:40]!r}")
        hoisted, main = _split_with(text)
        self.hoisted = _pieces(hoisted)
        """The statement's own ``WITH`` list (empty if none), split at its placeholders."""
        self.main = _pieces(main)
        """The statement after that list, split at its placeholders."""
        self.kinds = "".join(_PLACEHOLDER.findall(text)).replace("%", "")
        """Each placeholder's letter (``s`` or ``b``), in order."""
        self.placeholders = len(self.kinds)
        written = _TABLE.match(main)
        self.table = written.group(1).lower() if written is not None else None
        self.names = frozenset(_NAME.findall(hoisted))
        self.reads = main.lstrip().upper().startswith("SELECT")


@functools.lru_cache(maxsize=1024)
def _shape(text: str) -> _Shape:
    return _Shape(text)


def _pieces(text: str) -> tuple[str, ...]:
    """``text`` split at its ``%s``/``%b`` placeholders (``%%`` read as ``%``)."""
    if not text:
        return ()
    pieces, start, literal = [], 0, []
    for match in _PLACEHOLDER.finditer(text):
        kind = match.group(1)
        if kind == "%":
            literal.append(text[start : match.start()] + "%")
        elif kind in "sb":
            pieces.append("".join(literal) + text[start : match.start()])
            literal = []
        else:
            raise NotCombinable(f"a placeholder the batch does not number: {match.group()!r}")
        start = match.end()
    pieces.append("".join(literal) + text[start:])
    return tuple(pieces)


def _numbered(pieces: tuple[str, ...], number: int) -> tuple[str, int]:
    """Join ``pieces`` with ``$n`` placeholders numbered after ``number``; the last number used."""
    out = [pieces[0]]
    for piece in pieces[1:]:
        number += 1
        out.append(f"${number}")
        out.append(piece)
    return "".join(out), number


def _split_with(text: str) -> tuple[str, str]:
    """A statement's leading ``WITH`` list (without the keyword; '' if none) and the rest."""
    stripped = text.lstrip()
    if not stripped.upper().startswith("WITH"):
        return "", stripped
    body = stripped[4:]
    depth = 0
    for i, ch in enumerate(body):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                rest = body[i + 1 :].lstrip()
                if not rest.startswith(","):
                    return body[: i + 1].strip(), rest
    raise NotCombinable("a WITH list without a statement after it")


NOT_KEPT: tuple[type[psycopg.Error], ...] = (
    pg_errors.InvalidSqlStatementName,
    pg_errors.DuplicatePreparedStatement,
)
"""What a prepared statement's Parse or Bind raises when the server connection behind the
session is not the one that prepared it (``26000``, ``42P05``): nothing was executed."""


_SENT: set[str] = set()
"""Statement texts sent before in this process (forgotten all at once past :data:`_SENT_MAX`)."""
_SENT_MAX = 4096


def _repeated(text: str) -> bool:
    """Whether ``text`` was sent before in this process (and is worth preparing).

    Preparing costs a round trip of its own the first time, so a statement's
    first use goes as text; a delivery's later steps reuse its shape.
    """
    if text in _SENT:
        return True
    if len(_SENT) >= _SENT_MAX:
        _SENT.clear()
    _SENT.add(text)
    return False


class StepCursor:
    """The cursor of a step's write transaction: one combined statement, or a transaction.

    Writes are kept in a :class:`StatementBatch`. :meth:`finish` sends them as
    one statement on the autocommit connection. A read, or a statement the
    batch cannot take, first begins an ordinary transaction on the connection
    and replays the kept statements in it; from then on every statement is
    sent as it comes, and :meth:`finish` commits.
    """

    def __init__(
        self, conn: psycopg.Connection[DictRow], *, counted: bool = True, prepare: bool = False
    ) -> None:
        self.conn = conn
        self.counted = counted
        """Whether falling back counts in :data:`FALLBACKS` (the step path's does)."""
        self.prepare = prepare
        """Whether the combined statement is sent prepared (decision 0153); cleared by
        :meth:`finish` when the server does not keep the connection's prepared statements."""
        self.kept = StatementBatch()
        self.cur: psycopg.Cursor[DictRow] | None = None
        self._stack = contextlib.ExitStack()

    def execute(self, query: Any, params: Sequence[Any] = ()) -> StepCursor:
        """Keep ``query`` for the combined statement, or send it in the open transaction."""
        if self.cur is None:
            try:
                self.kept.execute(query, params)
                return self
            except NotCombinable:
                self._begin("statement")
        assert self.cur is not None
        self.cur.execute(query, params)
        return self

    def executemany(self, query: Any, rows: Sequence[Sequence[Any]]) -> None:
        """Send ``query`` once per row, in the transaction this begins (no combining)."""
        if self.cur is None:
            self._begin("executemany")
        assert self.cur is not None
        self.cur.executemany(query, rows)

    def _begin(self, cause: str) -> None:
        """Begin a transaction and replay the kept statements in it (in order)."""
        if self.counted:
            FALLBACKS[cause] += 1
        self._stack.enter_context(self.conn.transaction())
        cur = self._stack.enter_context(self.conn.cursor())
        for query, params in self.kept.parts:
            cur.execute(query, params)
        self.cur = cur

    def _direct(self) -> psycopg.Cursor[DictRow]:
        if self.cur is None:
            self._begin("read")  # the statement just kept is replayed last: its result is next
        assert self.cur is not None
        return self.cur

    def fetchone(self) -> DictRow | None:
        """The next row of the last statement (sent in a transaction from now on)."""
        return self._direct().fetchone()

    def fetchall(self) -> list[DictRow]:
        """Every row of the last statement (sent in a transaction from now on)."""
        return self._direct().fetchall()

    @property
    def rowcount(self) -> int:
        """Rows the last statement touched (sent in a transaction from now on)."""
        return self._direct().rowcount

    def finish(self) -> None:
        """Apply everything: send the combined statement, or commit the transaction."""
        if self.cur is not None:
            self._stack.close()
            return
        statement = self.kept.combined()
        if statement is None:
            return
        with psycopg.RawCursor(self.conn) as raw:
            if self.prepare and _repeated(statement[0]):
                try:
                    raw.execute(statement[0], statement[1], prepare=True)
                    return
                except NOT_KEPT:
                    # Refused at Parse or Bind, before anything ran: a pooler that
                    # hands the session to another server connection. Send it as
                    # text, and tell the caller to stop preparing.
                    self.prepare = False
            raw.execute(statement[0], statement[1], prepare=False)  # not even a cached name

    def abandon(self, exc: BaseException) -> None:
        """Apply nothing: roll back the transaction if one was begun."""
        self._stack.__exit__(type(exc), exc, exc.__traceback__)
