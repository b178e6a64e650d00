"""The PostgreSQL store: schema migrations, connections and per-delivery leases.

Owns every SQL statement of the Host's tables on PostgreSQL and the rules of
its leases (a fencing token that increases on every grant, checked in every
write transaction). Imports psycopg, never LangGraph: the checkpoint saver that
writes these rows in the checkpoint's transaction lives in ``host.langgraph``.
"""

from host.postgres._connect import aconnect, connect, connect_error, is_postgres, shown
from host.postgres._leases import (
    LEASE_FOR_SHARE,
    check_token,
    check_token_sync,
    fenced,
    grant,
    release,
    renew,
)
from host.postgres._migrations import (
    MIGRATIONS,
    SCHEMA_VERSION,
    Migration,
    check_database,
    migrate,
    require_current,
)

__all__ = [
    "LEASE_FOR_SHARE",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Migration",
    "aconnect",
    "check_database",
    "check_token",
    "check_token_sync",
    "connect",
    "connect_error",
    "fenced",
    "grant",
    "is_postgres",
    "migrate",
    "release",
    "renew",
    "require_current",
    "shown",
]
