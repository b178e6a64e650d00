"""SQLite failures on opening or reading a store, as catalogued errors."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from contracts import ErrorCode, ExecsysError, error


def store_not_found(store: Path) -> ExecsysError:
    """The error for a store file that does not exist where a command needs one."""
    return error(
        ErrorCode.STORE_NOT_FOUND,
        "no store here",
        path=str(store),
        expected=(
            "a store created by 'execsys run', 'execsys submit' or 'execsys goal create' "
            "(check --store and EXECSYS_STORE)"
        ),
    )


def refuse_unusable(store: Path, *, read_only: bool) -> None:
    """Refuse a store path that cannot work before SQLite makes a guess about it."""
    if store.is_dir():
        raise error(
            ErrorCode.STORE_UNREADABLE,
            "the store path is a directory",
            path=str(store),
            expected="an SQLite store file",
        )
    if read_only or not store.exists():
        return
    if not os.access(store, os.W_OK) or not os.access(store.parent, os.W_OK):
        raise error(
            ErrorCode.STORE_READ_ONLY,
            "the store (or its folder) is read-only",
            path=str(store),
            expected="a writable store; status, inspect and journal export/verify can read it",
        )


def store_error(exc: sqlite3.Error, store: Path) -> ExecsysError:
    """The catalogued error for an SQLite failure on opening or reading ``store``."""
    text = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    if "readonly" in text or "read-only" in text:
        return error(
            ErrorCode.STORE_READ_ONLY,
            f"the store cannot be written: {text}",
            path=str(store),
            expected="a writable store; status, inspect and journal export/verify can read it",
        )
    if isinstance(exc, sqlite3.OperationalError) and "locked" not in text:
        return error(
            ErrorCode.STORE_UNREADABLE,
            f"the store cannot be opened: {text}",
            path=str(store),
            expected="a readable SQLite store file",
        )
    if isinstance(exc, sqlite3.OperationalError):
        return error(ErrorCode.STORE_ERROR, text, path=str(store), expected="a store not locked")
    return error(
        ErrorCode.STORE_UNREADABLE,
        f"the store is damaged or not an execsys store: {text}",
        path=str(store),
        expected="an intact SQLite store (restore a backup or choose another --store)",
    )


def driver_failure(exc: BaseException, where: str) -> ExecsysError | None:
    """The catalogued error for an ``sqlite3`` exception that escaped to the CLI, else None.

    Opening a store maps its own failures (:func:`store_error`); this is damage
    or contention found while reading later. Lets layers that may not import the
    driver (the product's error boundary) map its failures without its types.
    """
    if not isinstance(exc, sqlite3.Error):
        return None
    text = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    if isinstance(exc, sqlite3.OperationalError):
        return error(ErrorCode.STORE_ERROR, text, path=where, expected="a store that can be read")
    return error(
        ErrorCode.STORE_UNREADABLE,
        f"the store is damaged: {text}",
        path=where,
        expected="an intact SQLite store (restore a backup or choose another --store)",
    )
