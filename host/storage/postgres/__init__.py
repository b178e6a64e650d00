"""The PostgreSQL backend of the storage port: schema migrations, connections, leases.

Owns every SQL statement the Host runs on a PostgreSQL store: the migrations,
the Host's tables, the lease rows with their fencing token (read ``FOR SHARE``
in every write transaction), and the statements LangGraph's checkpointer
subclass adds inside its own transaction. It may import psycopg; it may not
import LangGraph or anything of the Host core beyond the port it implements.
"""

from host.storage.postgres._connect import (
    connect,
    connect_error,
    driver_failure,
    is_postgres,
    shown,
    store_failure,
)
from host.storage.postgres._leases import FENCED_STATE, LEASE_FOR_SHARE, fenced_token
from host.storage.postgres._listen import QUEUE_CHANNEL, QueueListener
from host.storage.postgres._migrations import (
    MIGRATIONS,
    SCHEMA_VERSION,
    Migration,
    check_database,
    migrate,
    require_current,
)
from host.storage.postgres._storage import PostgresStorage
from host.storage.postgres._tx import BODY_COLUMN, PostgresTx

__all__ = [
    "BODY_COLUMN",
    "FENCED_STATE",
    "LEASE_FOR_SHARE",
    "MIGRATIONS",
    "QUEUE_CHANNEL",
    "SCHEMA_VERSION",
    "Migration",
    "PostgresStorage",
    "PostgresTx",
    "QueueListener",
    "check_database",
    "connect",
    "connect_error",
    "driver_failure",
    "fenced_token",
    "is_postgres",
    "migrate",
    "require_current",
    "shown",
    "store_failure",
]
