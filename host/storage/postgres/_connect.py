"""Opening a PostgreSQL store: connection settings, and what each failure means.

Every connection the store opens has the settings LangGraph's saver needs
(``autocommit``, ``dict_row``). No statement is prepared on the server except
a step's one commit statement, and that only while the URL does not say
``execsys_prepare=off`` (decision 0153). A failure to connect is mapped to one
catalogued error here, so no caller ever shows a psycopg message raw.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import DictRow, dict_row

from contracts import PREPARE_OFF, PREPARE_OPTION, ErrorCode, ExecsysError, error

CONNECT_TIMEOUT_S = 5
"""How long a connection attempt may take before the server counts as unreachable."""

SETTINGS: dict[str, Any] = {
    "autocommit": True,
    "prepare_threshold": 1 << 62,
    "row_factory": dict_row,
}
"""Keyword arguments of every connection.

psycopg prepares a statement the first time it is asked to (``prepare=True``)
only if the connection's threshold is a number; a number this large means no
statement is ever prepared on its own count, so the step statement is the one
the store prepares."""


def prepares(url: str) -> bool:
    """Whether the store at ``url`` may prepare its step statement (``execsys_prepare``)."""
    for key, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        if key == PREPARE_OPTION:
            return value.lower() not in PREPARE_OFF
    return True


def _without_options(url: str) -> str:
    """``url`` without the parameters libpq does not know (:data:`PREPARE_OPTION`)."""
    parts = urlsplit(url)
    if PREPARE_OPTION not in parts.query:
        return url
    kept = [
        (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != PREPARE_OPTION
    ]
    return urlunsplit(parts._replace(query=urlencode(kept)))


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


LIVENESS: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}
"""libpq settings that notice a server that stopped answering (a network cut, a dead host).

A request in flight fails once the server has not acknowledged it for 30 s
(``tcp_user_timeout``, in ms); an idle wait for an answer fails after 30 s of
silence and three unanswered probes 10 s apart. libpq's own defaults leave that
to the system's TCP settings (two hours of silence on Linux), so a runner cut off
from its store would hang that long instead of failing its step with a store
error. The store URL may set any of them; its value wins."""


def conninfo(url: str) -> str:
    """The libpq connection string of a store URL (``postgres://`` accepted as an alias).

    :data:`LIVENESS` settings the URL does not name are added, and the store's own
    option (``execsys_prepare``) is taken out.
    """
    if url.startswith("postgres://"):
        url = "postgresql://" + url.removeprefix("postgres://")
    url = _without_options(url)
    try:
        given = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return url  # left to the connection attempt, which reports it as one coded error
    missing = {key: value for key, value in LIVENESS.items() if key not in given}
    return make_conninfo(url, **missing)


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
