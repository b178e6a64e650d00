"""A storage driver's failure, mapped by the backend that owns the driver.

Layers that may not import a database driver (the product's error boundary,
the runner loop) hand an exception that escaped from storage here. It is told
apart by its exception's module, so neither driver is imported for an error
that is not its own, and mapped to the catalogued error its backend gives it.
"""

from __future__ import annotations

from contracts import ExecsysError


def store_failure(exc: BaseException, where: str) -> ExecsysError | None:
    """The catalogued error for a driver exception (``where``: the store), else None."""
    module = type(exc).__module__
    if module == "sqlite3":
        from host.storage.sqlite import driver_failure as sqlite_failure

        return sqlite_failure(exc, where)
    if module.startswith("psycopg"):
        from host.storage.postgres import driver_failure

        return driver_failure(exc, where)
    return None


def shown_store(url: str) -> str:
    """The store URL as errors and listings show it: a password replaced by ``***``."""
    if url.startswith(("postgresql://", "postgres://")):
        from host.storage.postgres import shown

        return shown(url)
    return url
