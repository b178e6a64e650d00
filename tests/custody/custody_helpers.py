"""Helpers shared by the custody tests (imported by name: tests/ is not a package)."""

from __future__ import annotations

import hashlib
import time

from contracts import (
    ArtifactRef,
    CustodyPreview,
    DeliveryId,
    Digest,
    ExecutionSite,
    InvocationId,
    NodeId,
)

DELIVERY = DeliveryId("d-0123456789abcdef01234567")


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def sha(data: bytes) -> Digest:
    return Digest("sha256:" + hashlib.sha256(data).hexdigest())


def make_site(delivery: str = DELIVERY, **changes: object) -> ExecutionSite:
    fields: dict[str, object] = {
        "delivery": DeliveryId(delivery),
        "node": NodeId("plan"),
        "activation": 1,
        "invocation": InvocationId("inv-1"),
        "attempt": 1,
    }
    fields.update(changes)
    return ExecutionSite.model_validate(fields)


def preview(
    token: str, site: ExecutionSite, artifacts: tuple[ArtifactRef, ...] = ()
) -> CustodyPreview:
    return CustodyPreview(
        capability=token, site=site, update_digest=sha(b"update"), artifacts=artifacts
    )


def settle() -> None:
    """Let freshly written files leave the stat cache's racy window (50 ms)."""
    time.sleep(0.06)
