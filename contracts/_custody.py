"""Workspace/Custody: the records it exchanges with the Host and its protocol.

Custody is the Host's independent collaborator: it issues a signed capability
for each execution site, and at commit time it decides, from the capability
and the workspace it observes, whether what the action did may be committed.
The Host never inspects a workspace itself.

Protocol, per action step (see ``docs/architecture.md``)::

    cap = custody.issue(site, mode, paths)        # base = custody head
    ... executor runs with cap.token ...
    verdict = custody.validate(preview)           # checks cap + observed tree
    if verdict.accepted:
        custody.advance(delivery, verdict.savepoint)   # head moves; then checkpoint
    else:
        custody.restore(delivery, cap.claims.base_savepoint)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal, NamedTuple, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from contracts._errors import ErrorCode
from contracts._ids import DeliveryId, Digest, InvocationId, NodeId, SavepointId

WorkspaceMode = Literal["read", "write"]


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class ExecutionSite(_Frozen):
    """One exact place where an executor turn happens."""

    delivery: DeliveryId
    """The delivery."""
    node: NodeId
    """The node."""
    activation: int = Field(ge=1)
    """Which visit of the node (loops create new activations)."""
    invocation: InvocationId
    """The invocation (shared by all turns of one action-input episode)."""
    attempt: int = Field(ge=1)
    """Which attempt under the node's retry policy."""


class CapabilityClaims(_Frozen):
    """What a capability grants; the signed part."""

    site: ExecutionSite
    """Where it may be used."""
    mode: WorkspaceMode
    """``read``: the tree must stay unchanged; ``write``: changes inside ``paths``."""
    paths: tuple[str, ...] = ()
    """Relative path prefixes a write capability may change (empty: anywhere)."""
    protected: tuple[str, ...] = ()
    """Relative path prefixes no capability may change, whatever ``paths`` allows."""
    base_savepoint: SavepointId
    """The savepoint the workspace held when the capability was issued."""
    issued_at: float
    """Unix time of issue."""
    expires_at: float
    """Unix time after which it is refused."""
    nonce: str
    """Random identity of this capability (refuses replay)."""


class SignedCapability(_Frozen):
    """A capability and its HMAC-SHA256 signature, as handed to an executor."""

    claims: CapabilityClaims
    """The granted claims."""
    token: str
    """Opaque serialized form (claims + signature) passed in ``EXECSYS_CAPABILITY``."""


class FileEntry(_Frozen):
    """One regular file (or symlink) of a workspace tree."""

    path: str
    """Relative POSIX path."""
    mode: int
    """Permission bits (``st_mode & 0o7777``); symlinks use 0."""
    size: int
    """Size in bytes (symlinks: length of the target)."""
    sha256: Digest
    """Digest of the content (symlinks: of the target text)."""
    link: bool = False
    """Whether this entry is a symlink (its content is the target path)."""


class ArtifactRef(_Frozen):
    """An artifact named by an action's result: identity is kind/id/digest."""

    kind: str
    """What sort of artifact (``file``, ``report``, ...)."""
    id: str
    """Its id; for ``file`` artifacts the workspace-relative path."""
    digest: Digest
    """The content digest the action claims."""


class CustodyPreview(_Frozen):
    """What the Host intends to commit for one step, shown to custody before it does."""

    capability: str
    """The token of the capability the step ran under."""
    site: ExecutionSite
    """The site the Host believes the step ran at."""
    update_digest: Digest
    """Digest of the complete state/data-edge update the Host would apply."""
    artifacts: tuple[ArtifactRef, ...] = ()
    """Artifacts the result names; their digests must match the workspace."""


class CustodyVerdict(_Frozen):
    """Custody's answer to a preview."""

    accepted: bool
    """Whether the step may be committed."""
    savepoint: SavepointId | None = None
    """When accepted: the savepoint that captures the observed tree."""
    code: ErrorCode | None = None
    """When refused: why."""
    path: str = ""
    """When refused: the workspace path (or claim) that violated the capability."""
    message: str = ""
    """When refused: one sentence."""
    changed: tuple[str, ...] = ()
    """Paths that differ from the base savepoint."""


class RestoreResult(_Frozen):
    """The outcome of materializing a savepoint."""

    confirmed: bool
    """Whether re-hashing the tree matched the savepoint exactly."""
    savepoint: SavepointId
    """The savepoint that was restored."""
    differences: tuple[str, ...] = ()
    """When not confirmed: what still differs."""


class SavepointInfo(_Frozen):
    """A savepoint as listed by custody."""

    savepoint: SavepointId
    """Its id (the tree digest)."""
    files: int
    """Number of entries."""
    bytes: int
    """Total content size."""
    created_at: float
    """Unix time it was first recorded."""


class Custody(Protocol):
    """The Workspace/Custody collaborator, as the Host sees it."""

    def open(self, delivery: DeliveryId, seed: str | None = None) -> SavepointId:
        """Create (or reopen) the delivery's workspace; return its head savepoint."""
        ...

    def workspace(self, delivery: DeliveryId) -> str:
        """The absolute path of the delivery's workspace directory."""
        ...

    def head(self, delivery: DeliveryId) -> SavepointId:
        """The savepoint custody last advanced to."""
        ...

    def issue(
        self,
        site: ExecutionSite,
        mode: WorkspaceMode,
        paths: tuple[str, ...] = (),
        ttl_s: float = 3600.0,
        *,
        protected: tuple[str, ...] = (),
    ) -> SignedCapability:
        """Sign a capability for ``site`` based on the current head savepoint."""
        ...

    def validate(self, preview: CustodyPreview) -> CustodyVerdict:
        """Check the capability and the observed workspace; never moves the head."""
        ...

    def advance(self, delivery: DeliveryId, savepoint: SavepointId) -> None:
        """Make an accepted savepoint the head (called before the checkpoint commits)."""
        ...

    def restore(self, delivery: DeliveryId, savepoint: SavepointId) -> RestoreResult:
        """Materialize ``savepoint`` exactly, verify it, and make it the head if confirmed."""
        ...

    def savepoints(self, delivery: DeliveryId) -> list[SavepointInfo]:
        """Savepoints recorded for the delivery, oldest first."""
        ...

    def retire(self, delivery: DeliveryId) -> None:
        """Delete the workspace and every blob no other delivery references."""
        ...


class SavepointExport(NamedTuple):
    """One recorded savepoint as another machine's custody needs it (opaque bytes)."""

    record: bytes
    """The delivery's own custody record (what opening it fixed, e.g. its exclusions)."""
    manifest: bytes
    """The savepoint's manifest; its digest is the savepoint id."""
    info: SavepointInfo
    """How custody lists it."""
    digests: tuple[str, ...]
    """Every content digest the manifest names, once each."""


@runtime_checkable
class TransferableCustody(Custody, Protocol):
    """Custody whose savepoints can be copied to another machine's custody and back.

    What a fleet needs when its runners do not share a data folder: the Host
    keeps every savepoint a delivery reaches in the store as well, and a runner
    that drives the delivery next brings its local custody up to date from
    there. Every imported content is checked against its digest.
    """

    def export_savepoint(self, delivery: DeliveryId, savepoint: SavepointId) -> SavepointExport:
        """A recorded savepoint, ready to be kept elsewhere (``CUSTODY_SAVEPOINT_UNKNOWN``)."""
        ...

    def has_savepoint(self, delivery: DeliveryId, savepoint: SavepointId) -> bool:
        """Whether ``savepoint`` is recorded here for the delivery."""
        ...

    def missing_blobs(self, digests: Sequence[str]) -> list[str]:
        """Those of ``digests`` whose content is not stored here."""
        ...

    def read_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        """The stored contents of ``digests`` (``CUSTODY_SAVEPOINT_UNKNOWN`` if one is absent)."""
        ...

    def import_savepoint(
        self,
        delivery: DeliveryId,
        exported: SavepointExport,
        fetch: Callable[[Sequence[str]], Mapping[str, bytes]],
    ) -> None:
        """Record a savepoint exported elsewhere; ``fetch`` supplies the contents not stored here.

        Creates the delivery's records if this custody has none; never touches
        its workspace or head (``restore`` does). Refuses, changing nothing, a
        manifest that is not the savepoint it claims or a content that is not
        its digest (``CUSTODY_REJECTED``).
        """
        ...
