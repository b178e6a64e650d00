"""The custody archive on PostgreSQL: savepoints and contents for runners on other machines.

Tables (migration 5): ``execsys_custody`` (the delivery's head and custody
record), ``execsys_manifests`` (one row per savepoint of a delivery),
``execsys_blob_refs`` (which delivery names which content) and
``execsys_blobs`` (each content once, by digest).

Contents are shared between deliveries, so dropping one delivery deletes only
what no other delivery names. A concurrent ``put`` of another delivery may have
just found such a content present and skipped sending it: ``drop`` locks the
refs table against inserts until it commits, and ``put`` checks, after taking
its own ref rows, that every content it names exists (or asks for it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

import psycopg
from psycopg.rows import DictRow

from host.storage._port import ArchivedSavepoint, StorageTx

_COLUMNS = "m.savepoint, c.record, m.manifest, m.files, m.bytes, m.created"


class _Reads(Protocol):
    def read(self, sql: Any, params: tuple[Any, ...] = ()) -> list[DictRow]: ...


def _cursor(tx: StorageTx) -> psycopg.Cursor[DictRow]:
    return cast("psycopg.Cursor[DictRow]", tx.cur)  # type: ignore[attr-defined]


def _entry(row: DictRow) -> ArchivedSavepoint:
    return ArchivedSavepoint(
        savepoint=str(row["savepoint"]),
        record=bytes(row["record"]),
        manifest=bytes(row["manifest"]),
        files=int(row["files"]),
        bytes=int(row["bytes"]),
        created=float(row["created"]),
    )


class PostgresCustodyArchive:
    """:class:`~host.storage.CustodyArchive` over the store's pool."""

    def __init__(self, store: _Reads) -> None:
        self._store = store

    def head(self, delivery: str) -> str | None:
        """The archived head savepoint."""
        rows = self._store.read("SELECT head FROM execsys_custody WHERE delivery = %s", (delivery,))
        return str(rows[0]["head"]) if rows else None

    def savepoint(self, delivery: str, savepoint: str) -> ArchivedSavepoint | None:
        """One archived savepoint."""
        rows = self._store.read(
            f"SELECT {_COLUMNS} FROM execsys_manifests m JOIN execsys_custody c "
            "USING (delivery) WHERE m.delivery = %s AND m.savepoint = %s",
            (delivery, savepoint),
        )
        return _entry(rows[0]) if rows else None

    def savepoints(self, delivery: str) -> list[ArchivedSavepoint]:
        """Every archived savepoint, oldest first."""
        rows = self._store.read(
            f"SELECT {_COLUMNS} FROM execsys_manifests m JOIN execsys_custody c "
            "USING (delivery) WHERE m.delivery = %s ORDER BY m.created, m.savepoint",
            (delivery,),
        )
        return [_entry(row) for row in rows]

    def blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        """The archived contents among ``digests``."""
        rows = self._store.read(
            "SELECT digest, body FROM execsys_blobs WHERE digest = ANY(%s)", (list(digests),)
        )
        return {str(row["digest"]): bytes(row["body"]) for row in rows}

    def put(
        self,
        tx: StorageTx,
        delivery: str,
        savepoint: str,
        entry: ArchivedSavepoint,
        refs: Sequence[str],
        blobs: Mapping[str, bytes],
    ) -> list[str]:
        """Archive a savepoint and make it the head; the ``refs`` still without content."""
        cur = _cursor(tx)
        cur.execute(
            "INSERT INTO execsys_blob_refs (delivery, digest) "
            "SELECT %s, d FROM unnest(%s::text[]) d "
            "ON CONFLICT DO NOTHING",
            (delivery, list(refs)),
        )
        if blobs:
            cur.execute(
                "INSERT INTO execsys_blobs (digest, body) SELECT * FROM "
                "unnest(%s::text[], %s::bytea[]) ON CONFLICT DO NOTHING",
                (list(blobs), list(blobs.values())),
            )
        missing = cur.execute(
            "SELECT d FROM unnest(%s::text[]) d WHERE NOT EXISTS "
            "(SELECT 1 FROM execsys_blobs b WHERE b.digest = d)",
            (list(refs),),
        ).fetchall()
        if missing:
            return [str(row["d"]) for row in missing]
        cur.execute(
            "INSERT INTO execsys_manifests (delivery, savepoint, manifest, files, bytes, created) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (delivery, savepoint, entry.manifest, entry.files, entry.bytes, entry.created),
        )
        cur.execute(
            "INSERT INTO execsys_custody (delivery, head, record) VALUES (%s, %s, %s) "
            "ON CONFLICT (delivery) DO UPDATE SET head = EXCLUDED.head",
            (delivery, savepoint, entry.record),
        )
        return []

    def put_contents(self, tx: StorageTx, delivery: str, blobs: Mapping[str, bytes]) -> None:
        """Store contents (and the delivery's references to them) before their savepoint."""
        if not blobs:
            return
        cur = _cursor(tx)
        # The references first: a concurrent drop of another delivery then keeps them.
        cur.execute(
            "INSERT INTO execsys_blob_refs (delivery, digest) "
            "SELECT %s, d FROM unnest(%s::text[]) d ON CONFLICT DO NOTHING",
            (delivery, list(blobs)),
        )
        cur.execute(
            "INSERT INTO execsys_blobs (digest, body) SELECT * FROM "
            "unnest(%s::text[], %s::bytea[]) ON CONFLICT DO NOTHING",
            (list(blobs), list(blobs.values())),
        )

    def set_head(self, tx: StorageTx, delivery: str, savepoint: str) -> None:
        """Move the archived head."""
        _cursor(tx).execute(
            "UPDATE execsys_custody SET head = %s WHERE delivery = %s", (savepoint, delivery)
        )

    def prune(self, tx: StorageTx, delivery: str, keep: Sequence[str], names: Sequence[str]) -> int:
        """Forget the savepoints but ``keep`` and the head, and the contents only they named."""
        cur = _cursor(tx)
        cur.execute("LOCK TABLE execsys_blob_refs IN SHARE ROW EXCLUSIVE MODE")
        gone = cur.execute(
            "DELETE FROM execsys_manifests m WHERE m.delivery = %s AND m.savepoint <> ALL(%s) "
            "AND NOT EXISTS (SELECT 1 FROM execsys_custody c "
            "WHERE c.delivery = m.delivery AND c.head = m.savepoint) RETURNING m.savepoint",
            (delivery, list(keep)),
        ).fetchall()
        cur.execute(
            "WITH gone AS (DELETE FROM execsys_blob_refs WHERE delivery = %s "
            "AND digest <> ALL(%s) RETURNING digest) "
            "DELETE FROM execsys_blobs b USING gone WHERE b.digest = gone.digest AND NOT EXISTS "
            "(SELECT 1 FROM execsys_blob_refs r WHERE r.digest = gone.digest AND r.delivery <> %s)",
            (delivery, list(names), delivery),
        )
        return len(gone)

    def drop(self, tx: StorageTx, delivery: str) -> None:
        """Forget the delivery's savepoints and the contents nobody else names."""
        cur = _cursor(tx)
        cur.execute("LOCK TABLE execsys_blob_refs IN SHARE ROW EXCLUSIVE MODE")
        cur.execute("DELETE FROM execsys_custody WHERE delivery = %s", (delivery,))
        cur.execute("DELETE FROM execsys_manifests WHERE delivery = %s", (delivery,))
        cur.execute(
            "WITH gone AS (DELETE FROM execsys_blob_refs WHERE delivery = %s RETURNING digest) "
            "DELETE FROM execsys_blobs b USING gone WHERE b.digest = gone.digest AND NOT EXISTS "
            "(SELECT 1 FROM execsys_blob_refs r WHERE r.digest = gone.digest AND r.delivery <> %s)",
            (delivery, delivery),
        )
