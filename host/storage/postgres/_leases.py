"""The fencing read of the PostgreSQL backend.

Every write transaction of a delivery starts with :data:`LEASE_FOR_SHARE`
(through ``StorageTx.fencing_token``): it locks the lease row ``FOR SHARE``, so
a concurrent grant, which locks the row ``FOR UPDATE`` (``StorageTx.lease``),
waits for the write to commit or roll back, and the write after the grant
finds the new token and is refused by the Host core. Fencing is data in a row,
never a lock held by a session: no advisory locks, which a transaction pooler
would hand to another client.

A step's commit does not wait for that read: it sends :data:`FENCE_SQL`, a call
of the ``execsys_fence`` function (migration 6), as one part of the single
statement that carries every write of the step (decision 0146). The function
takes the same ``FOR SHARE`` lock and raises :data:`FENCED_STATE` when the token
is not the current one, which aborts the transaction before any of its writes is
kept (decision 0144).
"""

from __future__ import annotations

LEASE_FOR_SHARE = "SELECT token FROM execsys_leases WHERE delivery = %s FOR SHARE"
"""The fencing read every write transaction starts with (parameter: the delivery)."""

FIRST_GRANT = (
    "INSERT INTO execsys_leases (delivery, holder, token, expires) SELECT %s, %s, 1, %s "
    "WHERE NOT EXISTS (SELECT 1 FROM execsys_deliveries WHERE delivery = %s) "
    "ON CONFLICT (delivery) DO NOTHING"
)
"""A new delivery's first grant (delivery, holder, expires, delivery): one row or none.

An autocommit statement is its own transaction: a concurrent first grant of the
same delivery waits on the unique key and then inserts nothing.
"""

FENCE_SQL = "SELECT execsys_fence(%s, %s)"
"""The fencing check as one statement whose result nobody reads (delivery, token)."""

FENCED_STATE = "EXF01"
"""The SQLSTATE ``execsys_fence`` raises; its DETAIL is the current token (empty if none)."""

FENCE_FUNCTION = """
CREATE OR REPLACE FUNCTION execsys_fence(fenced_delivery TEXT, expected BIGINT)
RETURNS VOID LANGUAGE plpgsql AS $$
DECLARE
    current_token BIGINT;
BEGIN
    SELECT token INTO current_token FROM execsys_leases
        WHERE delivery = fenced_delivery FOR SHARE;
    IF current_token IS DISTINCT FROM expected THEN
        RAISE EXCEPTION USING ERRCODE = 'EXF01', MESSAGE = 'execsys: lease fenced',
            DETAIL = coalesce(current_token::text, '');
    END IF;
END $$;
"""
"""Migration 6's function: lock the lease row ``FOR SHARE``; raise unless the token matches."""


def fenced_token(exc: BaseException) -> str | None:
    """The current token an ``execsys_fence`` refusal names ('' if none), or None if not one."""
    if getattr(exc, "sqlstate", None) != FENCED_STATE:
        return None
    diag = getattr(exc, "diag", None)
    return str(getattr(diag, "message_detail", "") or "")
