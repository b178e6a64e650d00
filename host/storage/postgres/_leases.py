"""One writer per delivery across machines: lease rows with a fencing token.

A row of ``execsys_leases`` names the holder, its expiry (the database's
clock, so runners on machines with skewed clocks agree) and a token. A grant is
one statement: it inserts the row, or takes it over when the lease has expired
(or its holder is known to be dead), and always increments the token; a
released lease keeps its row so the token never goes back. The holder renews
every TTL/3; a renewal that finds another token means the lease was lost.

Every write transaction of a delivery calls :func:`check_token` first: it
reads the row ``FOR SHARE``, which makes a concurrent grant wait for the write
to finish (or the write wait for the grant), and refuses the write unless the
token is the writer's. A refused write raises inside the transaction, so
nothing of it is applied. No advisory locks: a lock held by a session does not
survive a transaction pooler, a row does.
"""

from __future__ import annotations

from collections.abc import Iterable

import psycopg
from psycopg.rows import DictRow

from contracts import ErrorCode, ExecsysError, error

_GRANT = """
INSERT INTO execsys_leases AS l (delivery, holder, token, expires)
VALUES (%(delivery)s, %(holder)s, 1, extract(epoch FROM clock_timestamp()) + %(ttl)s)
ON CONFLICT (delivery) DO UPDATE
SET holder = excluded.holder, token = l.token + 1, expires = excluded.expires
WHERE l.expires <= extract(epoch FROM clock_timestamp()) OR l.holder = ANY(%(dead)s)
RETURNING token
"""

_RENEW = """
UPDATE execsys_leases SET expires = extract(epoch FROM clock_timestamp()) + %(ttl)s
WHERE delivery = %(delivery)s AND token = %(token)s AND holder = %(holder)s
RETURNING token
"""

_RELEASE = """
UPDATE execsys_leases SET expires = 0
WHERE delivery = %(delivery)s AND token = %(token)s
"""


LEASE_FOR_SHARE = "SELECT token FROM execsys_leases WHERE delivery = %s FOR SHARE"
"""The fencing read every write transaction starts with (parameter: the delivery)."""


def fenced(delivery: str, found: object) -> ExecsysError:
    """The error of a write whose writer no longer holds the delivery's lease."""
    return error(
        ErrorCode.LEASE_FENCED,
        "this runner lost the delivery's lease to another holder; nothing more of it is written",
        path=delivery,
        expected=f"the current lease (fencing token {found if found is not None else '?'})",
    )


async def grant(
    conn: psycopg.AsyncConnection[DictRow],
    delivery: str,
    holder: str,
    ttl_s: float,
    dead: Iterable[str] = (),
) -> int | None:
    """Take the delivery's lease for ``holder``; the new token, or None while another holds it.

    ``dead`` names holders known to be gone (their runner stopped heartbeating):
    their leases are taken over before they expire. The token still fences them.
    """
    cur = await conn.execute(
        _GRANT,
        {"delivery": delivery, "holder": holder, "ttl": ttl_s, "dead": list(dead)},
    )
    row = await cur.fetchone()
    return int(row["token"]) if row else None


async def renew(
    conn: psycopg.AsyncConnection[DictRow], delivery: str, holder: str, token: int, ttl_s: float
) -> bool:
    """Extend a held lease by ``ttl_s`` from now; False when it was lost to another grant."""
    cur = await conn.execute(
        _RENEW, {"delivery": delivery, "holder": holder, "token": token, "ttl": ttl_s}
    )
    return await cur.fetchone() is not None


async def release(conn: psycopg.AsyncConnection[DictRow], delivery: str, token: int) -> None:
    """Give the lease back (a no-op when it was already taken over)."""
    await conn.execute(_RELEASE, {"delivery": delivery, "token": token})


async def check_token(cur: psycopg.AsyncCursor[DictRow], delivery: str, token: int | None) -> None:
    """Refuse the write transaction on ``cur`` unless ``token`` is the delivery's current one."""
    await cur.execute("SELECT token FROM execsys_leases WHERE delivery = %s FOR SHARE", (delivery,))
    row = await cur.fetchone()
    found = int(row["token"]) if row else None
    if token is None or found != token:
        raise fenced(delivery, found)


def check_token_sync(cur: psycopg.Cursor[DictRow], delivery: str, token: int | None) -> None:
    """:func:`check_token` for a synchronous transaction."""
    cur.execute(LEASE_FOR_SHARE, (delivery,))
    row = cur.fetchone()
    found = int(row["token"]) if row else None
    if token is None or found != token:
        raise fenced(delivery, found)
