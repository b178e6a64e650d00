"""The fencing read of the PostgreSQL backend.

Every write transaction of a delivery starts with :data:`LEASE_FOR_SHARE`
(through ``StorageTx.fencing_token``): it locks the lease row ``FOR SHARE``, so
a concurrent grant, which locks the row ``FOR UPDATE`` (``StorageTx.lease``),
waits for the write to commit or roll back, and the write after the grant
finds the new token and is refused by the Host core. Fencing is data in a row,
never a lock held by a session: no advisory locks, which a transaction pooler
would hand to another client.
"""

from __future__ import annotations

LEASE_FOR_SHARE = "SELECT token FROM execsys_leases WHERE delivery = %s FOR SHARE"
"""The fencing read every write transaction starts with (parameter: the delivery)."""
