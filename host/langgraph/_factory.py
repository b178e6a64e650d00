"""The LangGraph Host factory: validate the exact configuration, create storage."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path

from contracts import Custody, ErrorCode, ExecsysError, error
from contracts._config import LangGraphHostConfig, sqlite_path
from contracts._invocation import Invoker
from host._operations import Operation
from host._protocol import CoordinatorHost


def store_location(config: LangGraphHostConfig, base: Path | None = None) -> tuple[Path, Path]:
    """(store file, data folder) of a configuration; relative paths resolve against ``base``."""
    raw = sqlite_path(config.store)
    if raw is None:
        raise error(
            ErrorCode.HOST_CREATION_FAILED,
            "this build's LangGraph Host stores deliveries in SQLite only",
            path="store",
            expected="sqlite:///PATH (PostgreSQL support is not built in yet)",
        )
    path = Path(raw)
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    data = Path(config.data_dir) if config.data_dir else path.parent
    if not data.is_absolute():
        data = (base or Path.cwd()) / data
    return path, data


class LangGraphHostFactory:
    """Creates ``LangGraphHost`` instances for one exact configuration."""

    def __init__(self, config: LangGraphHostConfig, base: Path | None = None) -> None:
        # Construction only remembers the configuration: nothing is opened or compiled.
        self.config = config
        self.base = base

    def create(
        self, *, custody: Custody, invoker: Invoker, operations: Mapping[str, Operation]
    ) -> CoordinatorHost:
        """Open the store (creating it unless read-only) and return the Host; fail as one error."""
        from host.langgraph._host import LangGraphHost

        store, data = store_location(self.config, self.base)
        read_only = self.config.read_only
        _refuse_unusable(store, read_only=read_only)
        try:
            if not read_only:
                data.mkdir(parents=True, exist_ok=True)
            return LangGraphHost(
                store_path=store,
                data_dir=data,
                custody=custody,
                invoker=invoker,
                operations=operations,
                lease_ttl_s=self.config.lease_ttl_s,
                read_only=read_only,
            )
        except sqlite3.DatabaseError as exc:
            raise store_error(exc, store) from None
        except OSError as exc:
            raise error(
                ErrorCode.HOST_CREATION_FAILED,
                f"cannot create the store: {exc.strerror or exc}",
                path=str(store),
                expected="a writable store location",
            ) from None


def _refuse_unusable(store: Path, *, read_only: bool) -> None:
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
