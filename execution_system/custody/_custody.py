"""``FileCustody``: the Workspace/Custody collaborator on a local directory.

Layout under the custody root (callers pass the store's data folder)::

    key                      32-byte HMAC key, mode 0600, created on first use
    blobs/<2 hex>/<62 hex>   file contents by SHA-256 (shared by all deliveries)
    deliveries/<delivery>/   head, savepoint log, manifests, nonces, stat cache
    workspaces/<delivery>/   the working tree an executor runs in
    locks/                   flock files (store-wide and per delivery)

Locking: every operation that scans, writes blobs or moves a head holds the
store lock shared plus the delivery's lock; ``retire`` holds the store lock
exclusively while it collects blobs, so it never deletes a blob a concurrent
snapshot has just decided to reuse.
"""

from __future__ import annotations

import math
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import NoReturn

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
    error,
)
from execution_system.custody._attribution import IssueTimes
from execution_system.custody._blobs import BlobBatch, BlobStore
from execution_system.custody._capability import (
    MintedTokens,
    SigningKey,
    check_changes,
    check_site,
    decode_token,
    encode_token,
    load_or_create_key,
)
from execution_system.custody._durable import file_lock, fsync_dir
from execution_system.custody._reads import SavepointReads, folder_names
from execution_system.custody._reclaim import collect_unreferenced, prune_savepoints
from execution_system.custody._report import PruneReport, SnapshotReport, TreeMemory
from execution_system.custody._restore import materialize, verify
from execution_system.custody._state import DeliveryState, check_delivery
from execution_system.custody._transfer import SavepointTransfer
from execution_system.custody._tree import (
    DEFAULT_EXCLUDED,
    Refusal,
    Scan,
    Tree,
    check_relative_path,
    decode_manifest,
    diff,
    encode_manifest,
    savepoint_of,
    scan,
    tree_bytes,
)
from execution_system.custody._workspace import copy_seed, drop_leftover_openings, remove_tree
from host._faults import boundary

#: Workspace paths remembered per delivery id (a check and two path joins otherwise).
_WORKSPACE_MEMORY = 4096


def _raise(refusal: Refusal) -> NoReturn:
    raise error(refusal.code, refusal.message, path=refusal.path) from None


class FileCustody(SavepointTransfer, SavepointReads):
    """Workspace/Custody over a directory: savepoints, signed capabilities, validation.

    Implements :class:`contracts.Custody`. ``clock`` supplies Unix time for
    capability issue/expiry and savepoint records (tests inject one).
    ``exclude`` (``seed_exclude`` is its older name) names the folders left out
    of the seed, every snapshot, digest and restore of a delivery opened by this
    instance, wherever they are; it is recorded with the delivery at open, and
    the recorded set applies from then on, whatever a later instance is given.
    """

    def __init__(
        self,
        root: Path | str,
        *,
        clock: Callable[[], float] = time.time,
        seed_exclude: frozenset[str] = DEFAULT_EXCLUDED,
        exclude: frozenset[str] | None = None,
    ) -> None:
        self._root = Path(root).absolute()
        self._exclude = folder_names(seed_exclude if exclude is None else exclude)
        """Folder names left out of the trees of deliveries this instance opens."""
        self._clock = clock
        self._store_lock = os.fspath(self._root / "locks" / "store.lock")
        self._workspaces: dict[str, Path] = {}
        self._minted = MintedTokens()
        self._state = DeliveryState(self._root / "deliveries")
        self._blobs = BlobStore(self._root / "blobs")
        self._key: SigningKey | None = None
        self._trees = TreeMemory()
        self._issued = IssueTimes()

    def __repr__(self) -> str:
        return f"FileCustody(root={os.fspath(self._root)!r})"

    @property
    def root(self) -> Path:
        """The custody root folder."""
        return self._root

    # --- internals -------------------------------------------------------------------

    def _signing_key(self) -> SigningKey:
        if self._key is None:
            self._key = load_or_create_key(self._root / "key")
        return self._key

    def _workspace(self, delivery: str) -> Path:
        workspace = self._workspaces.get(delivery)
        if workspace is None:
            workspace = self._root / "workspaces" / check_delivery(delivery)
            if len(self._workspaces) < _WORKSPACE_MEMORY:
                self._workspaces[delivery] = workspace
        return workspace

    @contextmanager
    def _guard(self, delivery: str, *, exclusive_store: bool = False) -> Iterator[None]:
        with (
            file_lock(self._store_lock, exclusive=exclusive_store),
            self._state.lock(delivery),
        ):
            yield

    def _tree(self, delivery: str, savepoint: str) -> Tree:
        """The recorded tree of ``savepoint``; ``ValueError`` if unknown or corrupt."""
        # Existence is always checked on disk: another process may have retired the
        # delivery. Only the parse is cached (same id, same content, by construction).
        if not self._state.has_manifest(delivery, savepoint):
            raise ValueError(f"savepoint {savepoint} is not recorded for {delivery}")
        tree = self._trees.get(savepoint)
        if tree is None:
            data = self._state.manifest(delivery, savepoint)
            if data is None:
                raise ValueError(f"savepoint {savepoint} is not recorded for {delivery}")
            tree = decode_manifest(data, savepoint)
            self._trees.remember(savepoint, tree)
        return tree

    def _exclusions(self, delivery: str) -> frozenset[str]:
        try:
            return self._state.exclusions(delivery)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise Refusal(
                ErrorCode.CUSTODY_REJECTED, delivery, f"unreadable exclusion record: {exc}"
            ) from None

    def _record(self, delivery: str, tree: Tree) -> SavepointId:
        """Store the manifest of ``tree`` (its blobs are already durable) and log it."""
        data = encode_manifest(tree)
        savepoint = savepoint_of(data)
        info = SavepointInfo(
            savepoint=savepoint, files=len(tree), bytes=tree_bytes(tree), created_at=self._clock()
        )
        self._state.record(delivery, data, info)
        self._trees.remember(savepoint, tree)
        return savepoint

    @contextmanager
    def _scanning(
        self, delivery: str, *, full_verify: bool, head: SavepointId | None = None
    ) -> Iterator[tuple[Scan, BlobBatch]]:
        """Scan the workspace, staging new contents; unpublished ones are dropped on exit.

        ``head`` is the head the caller has just read under the delivery lock
        (read here otherwise).
        """
        workspace = self._workspace(delivery)
        try:
            # One lstat: a symbolic link to a folder is not a workspace.
            present = stat.S_ISDIR(os.lstat(workspace).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            present = False
        if not present:
            raise Refusal(
                ErrorCode.CUSTODY_WORKSPACE_UNKNOWN, delivery, "the workspace directory is missing"
            )
        if head is None:
            head = self._state.head(delivery)
        stored: set[str] = set()
        if head is not None:
            # An unreadable head manifest only costs existence checks.
            with suppress(ValueError):
                stored = {entry.sha256 for entry in self._tree(delivery, head).values()}
        batch = self._blobs.batch()
        try:
            observed = scan(
                workspace,
                cache=self._state.load_cache(delivery),
                batch=batch,
                full_verify=full_verify,
                stored=stored,
                skip=self._exclusions(delivery),
            )
            self._state.save_cache(delivery, observed.cache)
            yield observed, batch
        finally:
            batch.discard()

    def _commit(self, delivery: str, observed: Scan, batch: BlobBatch) -> SnapshotReport:
        """Publish the staged contents, then record the savepoint (head unchanged)."""
        batch.commit()
        savepoint = self._record(delivery, observed.tree)
        return SnapshotReport(
            savepoint=savepoint,
            files=len(observed.tree),
            bytes=tree_bytes(observed.tree),
            hashed_files=observed.hashed_files,
            hashed_bytes=observed.hashed_bytes,
        )

    # --- the Custody protocol -----------------------------------------------------------

    def open(self, delivery: DeliveryId, seed: str | None = None) -> SavepointId:
        """Create (or reopen) the delivery's workspace; return its head savepoint.

        Reopening returns the current head and ignores ``seed``. A workspace
        left without a head by a crash is snapshotted as it stands.
        """
        try:
            check_delivery(delivery)
        except Refusal as refusal:
            _raise(refusal)
        with self._guard(delivery):
            head = self._state.head(delivery)
            if head is not None:
                return head
            created = self._state.create(delivery)
            exclude = self._state.recorded_exclusions(delivery)
            if exclude is None:
                exclude = self._exclude
                self._state.record_exclusions(delivery, exclude)
            workspace = self._workspace(delivery)
            if not os.path.lexists(workspace):
                workspace.parent.mkdir(parents=True, exist_ok=True)
                drop_leftover_openings(workspace.parent, delivery)
                staging = workspace.parent / f".open-{delivery}-{secrets.token_hex(6)}"
                staging.mkdir()
                try:
                    # Written and checked in the staging folder, which nobody else can see
                    # or write: that tree is what the workspace holds when it appears.
                    tree, cache = (
                        ({}, {})
                        if seed is None
                        else copy_seed(Path(seed), staging, self._blobs, exclude)
                    )
                    boundary("custody-seed-publish", "before")
                    os.rename(staging, workspace)
                except BaseException:
                    remove_tree(staging)
                    if created:  # a refused seed leaves no records of a delivery never opened
                        self._state.remove(delivery)
                    raise
                fsync_dir(workspace.parent)
                boundary("custody-seed-publish", "after")
                savepoint = self._record(delivery, tree)
                self._state.save_cache(delivery, cache)
            else:  # left by a crash without a head: record it as it stands
                try:
                    with self._scanning(delivery, full_verify=False) as (observed, batch):
                        savepoint = self._commit(delivery, observed, batch).savepoint
                except Refusal as refusal:
                    _raise(refusal)
            self._state.set_head(delivery, savepoint)
            return savepoint

    def workspace(self, delivery: DeliveryId) -> str:
        """The absolute path of the delivery's workspace directory (exists once opened)."""
        try:
            return os.fspath(self._workspace(delivery))
        except Refusal as refusal:
            _raise(refusal)

    def head(self, delivery: DeliveryId) -> SavepointId:
        """The durable head, read from disk on its own (no lock, no other record)."""
        try:
            head = self._state.head(delivery)
        except Refusal as refusal:
            _raise(refusal)
        if head is None:
            raise error(
                ErrorCode.CUSTODY_WORKSPACE_UNKNOWN,
                "custody has no head for this delivery (never opened, or retired)",
                path=delivery,
            )
        return head

    def issue(
        self,
        site: ExecutionSite,
        mode: WorkspaceMode,
        paths: tuple[str, ...] = (),
        ttl_s: float = 3600.0,
        *,
        protected: tuple[str, ...] = (),
    ) -> SignedCapability:
        """Sign a capability for ``site`` based on the current head savepoint.

        Write prefixes are normalized (``src/`` -> ``src``) and must be
        canonical relative paths (``CUSTODY_PATH_TRAVERSAL`` otherwise).
        """
        if not math.isfinite(ttl_s) or ttl_s <= 0:
            raise ValueError("ttl_s must be a positive number of seconds")
        try:
            prefixes = tuple(check_relative_path(p.rstrip("/")) for p in paths)
            guarded = tuple(check_relative_path(p.rstrip("/")) for p in protected)
        except Refusal as refusal:
            _raise(refusal)
        head = self.head(site.delivery)
        now = self._clock()
        claims = CapabilityClaims(
            site=site,
            mode=mode,
            paths=prefixes,
            protected=guarded,
            base_savepoint=head,
            issued_at=now,
            expires_at=now + ttl_s,
            nonce=secrets.token_hex(16),
        )
        self._issued.remember(claims.nonce)
        token = encode_token(claims, self._signing_key())
        self._minted.remember(token, claims)
        return SignedCapability(claims=claims, token=token)

    def validate(self, preview: CustodyPreview, *, full_verify: bool = False) -> CustodyVerdict:
        """Check the capability and the observed workspace; never moves the head.

        An accepted verdict names a new recorded savepoint of the observed
        tree and burns the capability's nonce. ``full_verify`` re-reads every
        file instead of trusting the stat cache.
        """
        changed: list[str] = []
        try:
            claims = self._minted.take(preview.capability) or decode_token(
                preview.capability, self._signing_key()
            )
            check_site(claims, preview.site)
            delivery = check_delivery(preview.site.delivery)
            if self._clock() >= claims.expires_at:
                raise Refusal(
                    ErrorCode.CAPABILITY_EXPIRED, "capability.expires_at", "the capability expired"
                )
            artifacts = [
                (check_relative_path(ref.id), ref)
                for ref in preview.artifacts
                if ref.kind == "file"
            ]
            with self._guard(delivery):
                if claims.nonce in self._state.used_nonces(delivery):
                    raise Refusal(
                        ErrorCode.CAPABILITY_REPLAYED,
                        "capability.nonce",
                        "this capability was already used by an accepted commit",
                    )
                head = self._state.head(delivery)
                if head is None:
                    raise Refusal(
                        ErrorCode.CUSTODY_WORKSPACE_UNKNOWN, delivery, "the delivery has no head"
                    )
                if claims.base_savepoint != head:
                    raise Refusal(
                        ErrorCode.CAPABILITY_STALE_BASE,
                        "capability.base_savepoint",
                        f"the capability is based on {claims.base_savepoint}, "
                        f"but the head is {head}",
                    )
                try:
                    base = self._tree(delivery, head)
                except ValueError as exc:
                    raise Refusal(ErrorCode.CUSTODY_SAVEPOINT_UNKNOWN, head, str(exc)) from None
                with self._scanning(delivery, full_verify=full_verify, head=head) as (
                    observed,
                    batch,
                ):
                    changed = diff(base, observed.tree)
                    check_changes(claims, changed)
                    self._issued.check(
                        self._workspace(delivery), claims.nonce, changed, observed.tree
                    )
                    for path, ref in artifacts:
                        entry = observed.tree.get(path)
                        if entry is None or entry.link or entry.sha256 != ref.digest:
                            found = "absent" if entry is None else entry.sha256
                            raise Refusal(
                                ErrorCode.CUSTODY_ARTIFACT_MISMATCH,
                                path,
                                f"artifact claims {ref.digest}; the workspace holds {found}",
                            )
                    boundary("custody-validate", "before")
                    # The same entries make the same manifest: an unchanged tree is the
                    # head, already recorded with its blobs.
                    savepoint = (
                        self._commit(delivery, observed, batch).savepoint if changed else head
                    )
                self._state.use_nonce(delivery, claims.nonce)
                boundary("custody-validate", "after")
                return CustodyVerdict(accepted=True, savepoint=savepoint, changed=tuple(changed))
        except Refusal as refusal:
            return CustodyVerdict(
                accepted=False,
                code=refusal.code,
                path=refusal.path,
                message=refusal.message,
                changed=tuple(changed),
            )

    def advance(self, delivery: DeliveryId, savepoint: SavepointId) -> None:
        """Make a recorded savepoint the head (``CUSTODY_SAVEPOINT_UNKNOWN`` otherwise)."""
        try:
            with self._guard(delivery):
                try:
                    self._tree(delivery, savepoint)
                except ValueError as exc:
                    raise Refusal(
                        ErrorCode.CUSTODY_SAVEPOINT_UNKNOWN, savepoint, str(exc)
                    ) from None
                boundary("custody-advance", "before")
                self._state.set_head(delivery, savepoint)
                boundary("custody-advance", "after")
        except Refusal as refusal:
            _raise(refusal)

    def restore(
        self, delivery: DeliveryId, savepoint: SavepointId, *, full_verify: bool = False
    ) -> RestoreResult:
        """Materialize ``savepoint`` exactly, verify it, and make it the head if confirmed.

        ``confirmed=False`` ("restore uncertain") leaves the head where it was.
        """
        try:
            with self._guard(delivery):
                if not self._state.has_manifest(delivery, savepoint):
                    raise Refusal(
                        ErrorCode.CUSTODY_SAVEPOINT_UNKNOWN,
                        savepoint,
                        "the savepoint is not recorded for this delivery",
                    )
                try:
                    want = self._tree(delivery, savepoint)
                except ValueError as exc:
                    return RestoreResult(
                        confirmed=False, savepoint=savepoint, differences=(f"manifest: {exc}",)
                    )
                workspace = self._workspace(delivery)
                if not workspace.is_dir() or workspace.is_symlink():
                    remove_tree(workspace)
                    workspace.mkdir(parents=True)
                cache = self._state.load_cache(delivery)
                skip = self._exclusions(delivery)
                boundary("custody-restore", "before")
                try:
                    problems = materialize(workspace, want, self._blobs, cache, skip)
                    differences, observed = verify(
                        workspace, want, cache, full_verify=full_verify, skip=skip
                    )
                except OSError as exc:
                    # Whatever failed, the tree is now in an unknown state: uncertain, not failed.
                    return RestoreResult(
                        confirmed=False,
                        savepoint=savepoint,
                        differences=(f"workspace: {exc.strerror or exc}",),
                    )
                self._state.save_cache(delivery, observed.cache)
                found = list(dict.fromkeys(problems + differences))
                if found:
                    return RestoreResult(
                        confirmed=False, savepoint=savepoint, differences=tuple(found)
                    )
                self._state.set_head(delivery, savepoint)
                boundary("custody-restore", "after")
                return RestoreResult(confirmed=True, savepoint=savepoint)
        except Refusal as refusal:
            _raise(refusal)

    def savepoints(self, delivery: DeliveryId) -> list[SavepointInfo]:
        """Savepoints recorded for the delivery, oldest first."""
        try:
            return self._state.savepoints(delivery)
        except Refusal as refusal:
            _raise(refusal)

    def retire(self, delivery: DeliveryId) -> None:
        """Delete the workspace, the delivery's records and every blob nobody else references.

        Idempotent. If another delivery's manifest cannot be read, no blob is
        collected (a leak is preferable to deleting content still referenced).
        """
        try:
            with self._guard(delivery, exclusive_store=True):
                remove_tree(self._workspace(delivery))
                self._state.remove(delivery)
                collect_unreferenced(self._state, self._blobs)
        except Refusal as refusal:
            _raise(refusal)

    def prune(self, delivery: DeliveryId, keep: tuple[SavepointId, ...]) -> PruneReport:
        """Forget every savepoint of the delivery but ``keep`` and the head; free their blobs.

        For a finished delivery whose intermediate savepoints nobody will
        restore again (CodeClosure prunes a CLOSED goal's rejected generations
        after export). Every savepoint kept must be recorded
        (``CUSTODY_SAVEPOINT_UNKNOWN`` otherwise); the head is always kept.
        Blobs named by any remaining manifest of any delivery stay.

        Crash-safe by order, under the store lock held exclusively: the
        savepoint log is replaced first (atomically), so no listed savepoint
        ever lacks its manifest; then the other manifests are deleted; then
        the blobs no manifest names. A crash in between leaves only unlisted
        manifests or unreferenced blobs, a leak that the next ``prune`` (or
        ``retire``) removes; never a listed savepoint without its content.
        """
        try:
            check_delivery(delivery)
            with self._guard(delivery, exclusive_store=True):
                return prune_savepoints(self._state, self._blobs, delivery, keep)
        except Refusal as refusal:
            _raise(refusal)

    def release(self, delivery: DeliveryId) -> bool:
        """Delete a finished delivery's live workspace; keep its savepoints and blobs.

        Every savepoint stays exportable, and ``restore`` writes the workspace
        afresh should anyone drive the delivery again. True when a workspace
        was removed (False: already released). ``retire`` removes the rest.
        """
        try:
            with self._guard(delivery):
                workspace = self._workspace(delivery)
                existed = workspace.exists() or workspace.is_symlink()
                remove_tree(workspace)
                self._state.save_cache(delivery, {})
                return existed
        except Refusal as refusal:
            _raise(refusal)

    # --- beyond the protocol ----------------------------------------------------------

    def snapshot(self, delivery: DeliveryId, *, full_verify: bool = False) -> SnapshotReport:
        """Record a savepoint of the workspace as it stands, without moving the head.

        Raises the scan's refusal code (e.g. ``CUSTODY_SYMLINK_ESCAPE``) if the
        tree cannot be recorded.
        """
        try:
            with (
                self._guard(delivery),
                self._scanning(delivery, full_verify=full_verify) as (observed, batch),
            ):
                return self._commit(delivery, observed, batch)
        except Refusal as refusal:
            _raise(refusal)
