"""The one place LangGraph's and SQLite's exceptions become ours.

``tests/host/test_error_mapping.py`` checks that every exception class
``langgraph.errors`` defines is mapped, so an upgrade that adds one fails a
test instead of leaking a foreign exception through the Host's API.
"""

from __future__ import annotations

import sqlite3

import psycopg
from langgraph import errors as lg

from contracts import ErrorCode, ExecsysError, error

#: Every exception type of ``langgraph.errors`` and the code it becomes.
MAPPING: dict[type[BaseException], ErrorCode] = {
    lg.GraphRecursionError: ErrorCode.SUBSTRATE_ERROR,
    lg.InvalidUpdateError: ErrorCode.SUBSTRATE_ERROR,
    lg.GraphBubbleUp: ErrorCode.SUBSTRATE_ERROR,
    lg.GraphDrained: ErrorCode.SUBSTRATE_ERROR,
    lg.GraphInterrupt: ErrorCode.SUBSTRATE_ERROR,
    lg.NodeInterrupt: ErrorCode.SUBSTRATE_ERROR,
    lg.ParentCommand: ErrorCode.SUBSTRATE_ERROR,
    lg.EmptyInputError: ErrorCode.SUBSTRATE_ERROR,
    lg.TaskNotFound: ErrorCode.SUBSTRATE_ERROR,
    lg.UnknownInterruptError: ErrorCode.SUBSTRATE_ERROR,
    lg.NodeCancelledError: ErrorCode.SUBSTRATE_ERROR,
    lg.NodeTimeoutError: ErrorCode.SUBSTRATE_ERROR,
    sqlite3.Error: ErrorCode.STORE_ERROR,
    psycopg.Error: ErrorCode.STORE_ERROR,
}


def substrate_error(exc: BaseException, delivery: str) -> ExecsysError:
    """Map an exception escaping LangGraph to a catalogued error."""
    if isinstance(exc, ExecsysError):
        return exc
    code = next(
        (mapped for kind, mapped in MAPPING.items() if isinstance(exc, kind)),
        ErrorCode.SUBSTRATE_ERROR,
    )
    text = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    return error(code, text, path=delivery, expected="no substrate error; nothing was committed")
