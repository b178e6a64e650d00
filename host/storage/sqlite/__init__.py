"""The SQLite backend of the Host's storage port (the embedded default store).

Owns every SQL statement the Host runs on an SQLite store: its schema, the
Host's tables, the lease rows, and the statements LangGraph's checkpointer
subclass adds inside its own transaction. It may import ``sqlite3``; it may not
import LangGraph or anything of the Host core beyond the port it implements.
"""

from host.storage.sqlite._errors import (
    driver_failure,
    refuse_unusable,
    store_error,
    store_not_found,
)
from host.storage.sqlite._open import open_store
from host.storage.sqlite._storage import SCHEMA, SqliteStorage, connect
from host.storage.sqlite._tx import SqliteTx

__all__ = [
    "SCHEMA",
    "SqliteStorage",
    "SqliteTx",
    "connect",
    "driver_failure",
    "open_store",
    "refuse_unusable",
    "store_error",
    "store_not_found",
]
