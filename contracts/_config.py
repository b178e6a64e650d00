"""Closed configuration of the Runner's Host selection and the runner's executors."""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from contracts._delivery import ExecutorBinding

DEFAULT_STORE = "sqlite:///.execsys/state.db"
_SQLITE = re.compile(r"^sqlite:///(?P<path>/?[^\x00]+)$")
_POSTGRES = re.compile(r"^postgres(?:ql)?://[^\s]+$")

PREPARE_OPTION = "execsys_prepare"
"""A PostgreSQL store URL's own query parameter (decision 0153); libpq never sees it.

``off`` keeps every statement unprepared, for a transaction pooler that does not
carry prepared statements between its server connections (PgBouncer before 1.21,
or with ``max_prepared_statements = 0``). ``on``, the default, prepares a step's
commit statement once per connection."""
PREPARE_ON = frozenset({"on", "1", "true", "yes"})
PREPARE_OFF = frozenset({"off", "0", "false", "no"})


def store_url_problem(url: str) -> str | None:
    """Why ``url`` names no store this product can open, or ``None`` if it names one.

    Careless forms are refused rather than guessed: an empty URL, an in-memory
    database (it would vanish when the command exits), and query strings or
    fragments (SQLite would make them part of the file name).
    """
    shown = repr(url) if len(url) <= 200 else repr(url[:200]) + "..."
    if not url.strip():
        return "the store URL is empty"
    if url.startswith("sqlite:"):
        path = sqlite_path(url)
        if path is None:
            return f"store URL {shown} is not sqlite:///PATH or sqlite:////ABSPATH"
        if path.strip(" /").startswith(":memory:"):
            return f"store URL {shown} names an in-memory database, which is lost on exit"
        if not path.strip(" /"):
            return f"store URL {shown} names no file"
        if "?" in path or "#" in path:
            return f"store URL {shown} has a query or fragment; store options are not supported"
        return None
    if _POSTGRES.match(url):
        return _postgres_problem(url)
    if url in {"postgresql://", "postgres://"}:
        return (
            f"store URL {shown} names no server or database; use postgresql://USER:PW@HOST:PORT/DB"
        )
    scheme = url.split("://", 1)[0] if "://" in url else ""
    known = "sqlite:///PATH, sqlite:////ABSPATH or postgresql://..."
    if scheme:
        return f"unknown store URL scheme {scheme!r} in {shown}; use {known}"
    return f"store URL {shown} is not a URL; use {known}"


def _postgres_problem(url: str) -> str | None:
    """What is wrong with a PostgreSQL URL that can be told without connecting."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    hidden = url if parts.password is None else url.replace(f":{parts.password}@", ":***@", 1)
    shown = repr(hidden) if len(hidden) <= 200 else repr(hidden[:200]) + "..."
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == PREPARE_OPTION and value.lower() not in PREPARE_ON | PREPARE_OFF:
            return f"store URL {shown} has {PREPARE_OPTION}={value[:20]!r}; use on or off"
    if "," in netloc:
        return None  # several hosts (libpq's failover list): libpq reads them itself
    _, colon, port = netloc.rpartition(":") if not netloc.endswith("]") else ("", "", "")
    if colon and port and not (port.isdigit() and 0 < int(port) < 65536):
        return f"store URL {shown} has port {port[:20]!r}, not a number from 1 to 65535"
    return None


def sqlite_path(url: str) -> str | None:
    """The file path of a ``sqlite:///`` URL (relative or, with four slashes, absolute)."""
    match = _SQLITE.match(url)
    return match.group("path") if match else None


class LangGraphHostConfig(BaseModel):
    """The exact configuration of the LangGraph Host factory."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    engine: Literal["langgraph"]
    """The one Host selection value."""
    store: str = DEFAULT_STORE
    """Store URL: ``sqlite:///relative.db``, ``sqlite:////absolute.db`` or ``postgresql://...``."""
    data_dir: str | None = None
    """Folder for workspaces, blobs and locks; default: ``<store folder>/``."""
    lease_ttl_s: float = Field(default=30.0, gt=0, le=3600)
    """How long a lease survives a holder that stopped renewing it (cross-machine)."""

    read_only: bool = False
    """Open an existing store for reading only: never create, migrate or write it."""
    create: bool = True
    """Create an SQLite store file that does not exist yet. Commands that act on a
    delivery already stored set it to False, so a mistyped path is refused
    (``STORE_NOT_FOUND``) instead of leaving an empty store behind. A PostgreSQL
    database exists before any command runs; its schema is migrated either way."""

    @field_validator("store")
    @classmethod
    def _known_url(cls, value: str) -> str:
        problem = store_url_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


RunnerFactoryConfig = LangGraphHostConfig
"""The closed Host selection: today exactly one engine, ``langgraph``."""


class RunnerConfig(BaseModel):
    """The runner config file (``execsys.yaml``): executor bindings."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    executors: dict[str, ExecutorBinding] = Field(default_factory=dict)
    """Executor name -> binding."""
