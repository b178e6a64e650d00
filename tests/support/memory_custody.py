"""An in-memory Workspace/Custody for Host tests: it can accept, reject, and fail a restore.

It records every call in order, so tests can prove the commit protocol's
sequence (preview validated before anything is applied).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from contracts import (
    CapabilityClaims,
    CustodyPreview,
    CustodyVerdict,
    DeliveryId,
    ErrorCode,
    ExecutionSite,
    RestoreResult,
    SavepointId,
    SavepointInfo,
    SignedCapability,
    WorkspaceMode,
)


@dataclass
class MemoryCustody:
    """Custody whose verdicts are scripted by the test."""

    reject_nodes: set[str] = field(default_factory=set)
    """Previews from these nodes are refused (CUSTODY_REJECTED)."""
    uncertain_restore: bool = False
    """Restores report 'uncertain'."""
    calls: list[tuple[str, str]] = field(default_factory=list)
    """(operation, node or delivery) in call order."""
    heads: dict[str, SavepointId] = field(default_factory=dict)
    _counter: itertools.count[int] = field(default_factory=itertools.count)

    def open(self, delivery: DeliveryId, seed: str | None = None) -> SavepointId:
        self.calls.append(("open", delivery))
        return self.heads.setdefault(delivery, SavepointId(f"sp-{delivery}-0"))

    def workspace(self, delivery: DeliveryId) -> str:
        return "/nonexistent-memory-workspace"

    def head(self, delivery: DeliveryId) -> SavepointId:
        return self.heads[delivery]

    def issue(
        self,
        site: ExecutionSite,
        mode: WorkspaceMode,
        paths: tuple[str, ...] = (),
        ttl_s: float = 3600.0,
        *,
        protected: tuple[str, ...] = (),
    ) -> SignedCapability:
        self.calls.append(("issue", site.node))
        now = time.time()
        claims = CapabilityClaims(
            site=site,
            mode=mode,
            paths=paths,
            base_savepoint=self.heads[site.delivery],
            issued_at=now,
            expires_at=now + ttl_s,
            nonce=str(next(self._counter)),
        )
        return SignedCapability(claims=claims, token=f"memory:{site.node}:{claims.nonce}")

    def validate(self, preview: CustodyPreview) -> CustodyVerdict:
        self.calls.append(("validate", preview.site.node))
        if preview.site.node in self.reject_nodes:
            return CustodyVerdict(
                accepted=False,
                code=ErrorCode.CUSTODY_REJECTED,
                path="src/x",
                message="scripted rejection",
            )
        return CustodyVerdict(
            accepted=True,
            savepoint=SavepointId(f"sp-{preview.site.delivery}-{next(self._counter)}"),
        )

    def advance(self, delivery: DeliveryId, savepoint: SavepointId) -> None:
        self.calls.append(("advance", delivery))
        self.heads[delivery] = savepoint

    def restore(self, delivery: DeliveryId, savepoint: SavepointId) -> RestoreResult:
        self.calls.append(("restore", delivery))
        if self.uncertain_restore:
            return RestoreResult(confirmed=False, savepoint=savepoint, differences=("src/x",))
        self.heads[delivery] = savepoint
        return RestoreResult(confirmed=True, savepoint=savepoint)

    def savepoints(self, delivery: DeliveryId) -> list[SavepointInfo]:
        return []

    def retire(self, delivery: DeliveryId) -> None:
        self.calls.append(("retire", delivery))
