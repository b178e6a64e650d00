"""The Host's schema on PostgreSQL: numbered migrations, applied in order, recorded in a table.

``execsys_schema`` holds one row per applied migration. A migration run is one
transaction (PostgreSQL's DDL is transactional), under an exclusive lock on
that table, so two runners starting together on an empty database apply each
migration once and a failure leaves the schema as it was.

Before anything is created the database is checked: a database holding tables
of another application is refused (``STORE_FOREIGN``), and so is a schema
recorded by a newer release (``STORE_SCHEMA_NEWER``). LangGraph's checkpoint
tables are not ours: the substrate adapter creates and upgrades them with the
library's own migrations, called through ``substrate_setup`` after ours and in
the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import DictRow

from contracts import ErrorCode, error
from host.storage.postgres._connect import connect, shown, store_failure
from host.storage.postgres._leases import FENCE_FUNCTION


@dataclass(frozen=True)
class Migration:
    """One schema step: its number, what it does, and its SQL."""

    version: int
    """Position in the sequence, from 1, without gaps."""
    name: str
    """What the step does, in a few words."""
    sql: str
    """The statements, run inside the migration transaction."""


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "host tables",
        """
        CREATE TABLE execsys_deliveries (
            delivery TEXT PRIMARY KEY,
            graph TEXT NOT NULL,
            graph_digest TEXT NOT NULL,
            digest TEXT NOT NULL,
            document BYTEA NOT NULL,
            status TEXT NOT NULL,
            outcome TEXT,
            detail JSONB NOT NULL DEFAULT '{}',
            checkpoint TEXT,
            created DOUBLE PRECISION NOT NULL,
            updated DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX execsys_deliveries_by_change ON execsys_deliveries (updated, delivery);
        CREATE TABLE execsys_records (digest TEXT PRIMARY KEY, body BYTEA NOT NULL);
        CREATE TABLE execsys_record_refs (
            delivery TEXT NOT NULL,
            digest TEXT NOT NULL,
            PRIMARY KEY (delivery, digest)
        );
        CREATE TABLE execsys_journal (
            delivery TEXT NOT NULL,
            ordinal BIGINT NOT NULL,
            digest TEXT NOT NULL,
            line BYTEA NOT NULL,
            PRIMARY KEY (delivery, ordinal)
        );
        CREATE TABLE execsys_checkpoints (
            delivery TEXT NOT NULL,
            checkpoint TEXT NOT NULL,
            savepoint TEXT,
            events BIGINT NOT NULL,
            created DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (delivery, checkpoint)
        );
        CREATE TABLE execsys_stops (
            delivery TEXT PRIMARY KEY,
            requested DOUBLE PRECISION NOT NULL,
            actor TEXT NOT NULL
        );
        CREATE TABLE execsys_retirements (
            delivery TEXT PRIMARY KEY,
            "authorization" TEXT NOT NULL,
            fact BYTEA NOT NULL
        );
        -- A released lease keeps its row (expiry 0), so the token of the next grant
        -- still increases: the token never goes back. Expiry in epoch seconds; token 0
        -- marks a row placed before the first grant (never a valid token).
        CREATE TABLE execsys_leases (
            delivery TEXT PRIMARY KEY,
            holder TEXT NOT NULL,
            token BIGINT NOT NULL CHECK (token >= 0),
            expires DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX execsys_leases_by_holder ON execsys_leases (holder);
        """,
    ),
    Migration(
        2,
        "runner fleet: queue, runners, shared workspace blobs",
        """
        CREATE TABLE execsys_queue (
            delivery TEXT PRIMARY KEY,
            reason TEXT NOT NULL,
            queued TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        );
        CREATE INDEX execsys_queue_by_age ON execsys_queue (queued);
        CREATE TABLE execsys_runners (
            name TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            started TIMESTAMPTZ NOT NULL,
            heartbeat TIMESTAMPTZ NOT NULL
        );
        CREATE TABLE execsys_blobs (digest TEXT PRIMARY KEY, body BYTEA NOT NULL);
        CREATE TABLE execsys_manifests (
            savepoint TEXT PRIMARY KEY,
            delivery TEXT NOT NULL,
            manifest BYTEA NOT NULL
        );
        """,
    ),
    Migration(
        3,
        "drop the unused queue table (queued work is the status row; see decision 0093)",
        """
        DROP TABLE IF EXISTS execsys_queue;
        """,
    ),
    Migration(
        4,
        "goals: CodeClosure's goal rows and their notes",
        """
        CREATE TABLE execsys_goals (
            goal TEXT PRIMARY KEY,
            version BIGINT NOT NULL CHECK (version >= 1),
            document BYTEA NOT NULL,
            delivery TEXT,
            state TEXT NOT NULL,
            created DOUBLE PRECISION NOT NULL,
            updated DOUBLE PRECISION NOT NULL
        );
        CREATE TABLE execsys_goal_notes (
            id BIGSERIAL PRIMARY KEY,
            goal TEXT NOT NULL,
            time DOUBLE PRECISION NOT NULL,
            text TEXT NOT NULL
        );
        CREATE INDEX execsys_goal_notes_by_goal ON execsys_goal_notes (goal, time, id);
        """,
    ),
    Migration(
        5,
        "custody archive: each delivery's savepoints and their contents (decision 0122)",
        """
        DROP TABLE IF EXISTS execsys_manifests;
        CREATE TABLE execsys_custody (
            delivery TEXT PRIMARY KEY,
            head TEXT NOT NULL,
            record BYTEA NOT NULL
        );
        CREATE TABLE execsys_manifests (
            delivery TEXT NOT NULL,
            savepoint TEXT NOT NULL,
            manifest BYTEA NOT NULL,
            files BIGINT NOT NULL,
            bytes BIGINT NOT NULL,
            created DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (delivery, savepoint)
        );
        CREATE TABLE execsys_blob_refs (
            delivery TEXT NOT NULL,
            digest TEXT NOT NULL,
            PRIMARY KEY (delivery, digest)
        );
        CREATE INDEX execsys_blob_refs_by_digest ON execsys_blob_refs (digest);
        """,
    ),
    Migration(6, "the fencing check as a function a pipeline need not wait for", FENCE_FUNCTION),
    Migration(
        7,
        "checkpoint bodies: each checkpoint whole or as a delta of its parent (decision 0155)",
        """
        CREATE TABLE execsys_checkpoint_bodies (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL,
            checkpoint_id TEXT NOT NULL,
            parent_id TEXT,
            type TEXT NOT NULL,
            body BYTEA NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
        );
        """,
    ),
)

SCHEMA_VERSION = MIGRATIONS[-1].version
"""The schema this release reads and writes."""

_OURS = ("execsys_",)
_SUBSTRATE = ("checkpoint",)
"""Table-name prefixes a store may hold: ours, and LangGraph's checkpoint tables."""

SubstrateSetup = Callable[[psycopg.Connection[DictRow]], None]


def _tables(conn: psycopg.Connection[DictRow]) -> list[str]:
    rows = conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    ).fetchall()
    return sorted(str(r["table_name"]) for r in rows)


def _applied(conn: psycopg.Connection[DictRow]) -> int | None:
    """The highest applied migration, or None when the database holds no execsys schema."""
    if "execsys_schema" not in _tables(conn):
        return None
    row = conn.execute("SELECT max(version) AS v FROM execsys_schema").fetchone()
    return int(row["v"]) if row and row["v"] is not None else 0


def check_database(conn: psycopg.Connection[DictRow], url: str) -> int | None:
    """Refuse a foreign or newer database; return the applied version (None: empty)."""
    foreign = [t for t in _tables(conn) if not t.startswith(_OURS + _SUBSTRATE)]
    if foreign:
        listed = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise error(
            ErrorCode.STORE_FOREIGN,
            f"the database holds tables of another application ({listed})",
            path=shown(url),
            expected="a database of its own for execsys (createdb NAME); nothing was created",
        )
    version = _applied(conn)
    if version is not None and version > SCHEMA_VERSION:
        raise error(
            ErrorCode.STORE_SCHEMA_NEWER,
            f"the store's schema is version {version}, newer than this release's {SCHEMA_VERSION}",
            path=shown(url),
            expected="an execsys release of the same or a newer schema (upgrade this runner)",
        )
    return version


def require_current(conn: psycopg.Connection[DictRow], url: str) -> None:
    """For reading commands: the store must exist at exactly this release's schema."""
    version = check_database(conn, url)
    if version != SCHEMA_VERSION:
        raise error(
            ErrorCode.STORE_NOT_MIGRATED,
            "the database holds no execsys store"
            if version is None
            else f"the store's schema is version {version}, older than {SCHEMA_VERSION}",
            path=shown(url),
            expected="a migrated store: run 'execsys store migrate --store URL' "
            "(writing commands migrate an empty one themselves)",
        )


def migrate(url: str, substrate_setup: SubstrateSetup | None = None) -> tuple[int, int]:
    """Bring the store at ``url`` to this release's schema; return (version before, after).

    ``substrate_setup`` creates or upgrades the substrate's own tables on the
    same connection, in the same transaction, after the Host's migrations: the
    whole upgrade applies or none of it does.
    """
    conn = connect(url)
    try:
        with conn:
            before = _migrate_host(conn, url, substrate_setup)
            return before, SCHEMA_VERSION
    except psycopg.Error as exc:
        raise store_failure(exc, url) from None


def _migrate_host(
    conn: psycopg.Connection[DictRow], url: str, substrate_setup: SubstrateSetup | None
) -> int:
    for attempt in range(3):
        try:
            with conn.transaction():
                check_database(conn, url)
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS execsys_schema (version INTEGER PRIMARY KEY, "
                    "name TEXT NOT NULL, applied TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())"
                )
                # Serializes concurrent migrators; the second one finds the work done.
                conn.execute("LOCK TABLE execsys_schema IN EXCLUSIVE MODE")
                before = check_database(conn, url) or 0
                for step in MIGRATIONS[before:]:
                    conn.execute(step.sql.encode())
                    conn.execute(
                        "INSERT INTO execsys_schema (version, name) VALUES (%s, %s)",
                        (step.version, step.name),
                    )
                if substrate_setup is not None:
                    substrate_setup(conn)
                return before
        except pg_errors.UniqueViolation:
            # Two first-time migrators created execsys_schema at once; the loser retries.
            if attempt == 2:
                raise
    raise AssertionError("unreachable")  # pragma: no cover
