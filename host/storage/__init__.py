"""The Host's storage port: transactions over its tables and the checkpoint, leases, records.

Owns the protocols a storage backend implements (:class:`Storage`,
:class:`StorageTx`) and the row shapes they return. Backends live in one
sub-package each (``host.storage.sqlite``) and hold all of their SQL; this
package imports no database driver and no LangGraph (import-linter enforces it).
"""

from host.storage._fencing import fenced
from host.storage._port import (
    ArchivedSavepoint,
    CustodyArchive,
    DeliveryRow,
    GoalRow,
    LeaseRow,
    ListedDelivery,
    RunnerRow,
    Storage,
    StorageTx,
)

__all__ = [
    "ArchivedSavepoint",
    "CustodyArchive",
    "DeliveryRow",
    "GoalRow",
    "LeaseRow",
    "ListedDelivery",
    "RunnerRow",
    "Storage",
    "StorageTx",
    "fenced",
]
