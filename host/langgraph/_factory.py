"""The LangGraph Host factory: validate the exact configuration, create storage."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from contracts import Custody, ErrorCode, error
from contracts._config import LangGraphHostConfig, sqlite_path
from contracts._invocation import Invoker
from host._journal_book import JournalBook
from host._operations import Operation
from host._protocol import CoordinatorHost
from host._substrate import Substrate
from host.storage import Storage
from host.storage.sqlite import open_store, refuse_unusable, store_not_found


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
        from host._service import WorkflowHost
        from host._views import derive_status
        from host.langgraph._substrate import LangGraphSubstrate

        if self.config.store.startswith(("postgresql://", "postgres://")):
            return self._create_postgres(custody=custody, invoker=invoker, operations=operations)
        store, data = store_location(self.config, self.base)
        read_only = self.config.read_only
        refuse_unusable(store, read_only=read_only)
        if not self.config.create and not store.exists():
            raise store_not_found(store)
        try:
            if not read_only:
                data.mkdir(parents=True, exist_ok=True)
            storage = open_store(store, read_only=read_only)
        except OSError as exc:
            raise error(
                ErrorCode.HOST_CREATION_FAILED,
                f"cannot create the store: {exc.strerror or exc}",
                path=str(store),
                expected="a writable store location",
            ) from None

        def substrate(_: Storage, journals: JournalBook) -> Substrate:
            # The checkpointer shares the SQLite backend's one connection and lock.
            return LangGraphSubstrate(storage, journals, derive_status)

        return WorkflowHost(
            store=storage,
            substrate=substrate,
            data_dir=data,
            custody=custody,
            invoker=invoker,
            operations=operations,
            lease_ttl_s=self.config.lease_ttl_s,
        )

    def _create_postgres(
        self, *, custody: Custody, invoker: Invoker, operations: Mapping[str, Operation]
    ) -> CoordinatorHost:
        """The Host on a PostgreSQL store; a writer migrates an empty or older schema first."""
        import psycopg

        from host._service import WorkflowHost
        from host._views import derive_status
        from host.langgraph._pg_saver import setup_checkpoint_tables
        from host.langgraph._substrate import LangGraphSubstrate
        from host.storage.postgres import PostgresStorage, store_failure

        url = self.config.store
        data = Path(self.config.data_dir or ".execsys")
        if not data.is_absolute():
            data = (self.base or Path.cwd()) / data
        read_only = self.config.read_only
        try:
            storage = PostgresStorage.open(
                url, readonly=read_only, substrate_setup=setup_checkpoint_tables
            )
            if not read_only:
                data.mkdir(parents=True, exist_ok=True)
                storage.setup()
            opened = storage

            def substrate(_: Storage, journals: JournalBook) -> Substrate:
                # The checkpointer shares the backend's pool and its transactions.
                return LangGraphSubstrate(opened, journals, derive_status)

            return WorkflowHost(
                store=storage,
                substrate=substrate,
                data_dir=data,
                custody=custody,
                invoker=invoker,
                operations=operations,
                lease_ttl_s=self.config.lease_ttl_s,
            )
        except psycopg.Error as exc:
            raise store_failure(exc, url) from None
        except OSError as exc:
            raise error(
                ErrorCode.HOST_CREATION_FAILED,
                f"cannot create the data folder: {exc.strerror or exc}",
                path=str(data),
                expected="a writable data folder (data_dir) for workspaces and locks",
            ) from None
