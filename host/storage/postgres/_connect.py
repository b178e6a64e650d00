"""Opening a PostgreSQL store: connection settings, and what each failure means.

Every connection the store opens has the settings LangGraph's saver needs
(``autocommit``, ``dict_row``, no server-side prepared statements, which also
keeps it usable behind a transaction pooler). A failure to connect is mapped
to one catalogued error here, so no caller ever shows a psycopg message raw.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import DictRow, dict_row

from contracts import ErrorCode, ExecsysError, error

CONNECT_TIMEOUT_S = 5
"""How long a connection attempt may take before the server counts as unreachable."""

SETTINGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": None, "row_factory": dict_row}
"""Keyword arguments of every connection (prepare_threshold=None: never prepare)."""


def is_postgres(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL store."""
    return url.startswith(("postgresql://", "postgres://"))


def shown(url: str) -> str:
    """The URL as errors and listings show it: the password, if any, replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def conninfo(url: str) -> str:
    """The libpq connection string of a store URL (``postgres://`` accepted as an alias)."""
    if url.startswith("postgres://"):
        return "postgresql://" + url.removeprefix("postgres://")
    return url


def connect(url: str) -> psycopg.Connection[DictRow]:
    """One synchronous connection to the store's database, or one catalogued error."""
    try:
        return psycopg.Connection.connect(
            conninfo(url), connect_timeout=CONNECT_TIMEOUT_S, **SETTINGS
        )
    except psycopg.Error as exc:
        raise connect_error(exc, url) from None


def connect_error(exc: psycopg.Error, url: str) -> ExecsysError:
    """The catalogued error for a failure to open a connection to ``url``."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[-1][:200]
    where = shown(url)
    state = getattr(exc, "sqlstate", None)
    lowered = str(exc).lower()
    if isinstance(exc, pg_errors.InvalidPassword | pg_errors.InvalidAuthorizationSpecification) or (
        "authentication failed" in lowered
        or "no password supplied" in lowered
        or state in {"28P01", "28000"}
    ):
        return error(
            ErrorCode.STORE_AUTH_FAILED,
            f"the server refused these credentials: {text}",
            path=where,
            expected="a user and password the server accepts (postgresql://USER:PW@HOST:PORT/DB)",
        )
    if isinstance(exc, pg_errors.InvalidCatalogName) or (
        "database" in lowered and "does not exist" in lowered
    ):
        return error(
            ErrorCode.STORE_NOT_FOUND,
            f"no such database on that server: {text}",
            path=where,
            expected="an existing database (createdb NAME), named in the store URL",
        )
    if isinstance(exc, psycopg.OperationalError):
        return error(
            ErrorCode.STORE_UNREACHABLE,
            f"cannot reach the PostgreSQL server: {text}",
            path=where,
            expected="a running server at the URL's host and port",
        )
    return error(
        ErrorCode.STORE_ERROR,
        f"cannot open the store: {text}",
        path=where,
        expected="a PostgreSQL server that accepts the connection",
    )


def store_failure(exc: psycopg.Error, url: str) -> ExecsysError:
    """The catalogued error for a failure of an open store (lost connection, server gone)."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    if isinstance(exc, psycopg.OperationalError):
        return error(
            ErrorCode.STORE_UNREACHABLE,
            f"lost the connection to the store: {text}",
            path=shown(url),
            expected="a server that stays reachable; nothing of the interrupted write was applied",
        )
    return error(ErrorCode.STORE_ERROR, text, path=shown(url), expected="a store that can be read")


def driver_failure(exc: BaseException, url: str) -> ExecsysError | None:
    """The catalogued error for a psycopg exception that escaped to the CLI, else None.

    Lets layers that may not import the driver (the product's error boundary)
    map its failures without knowing its types.
    """
    return store_failure(exc, url) if isinstance(exc, psycopg.Error) else None
