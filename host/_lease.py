"""One writer per delivery: a lease row with an expiry and a fencing token.

The lease row in the store (holder, token, expires) is the authority, and it
works wherever the store is shared. A grant happens in one write transaction:
it succeeds when there is no row, when the row's lease has expired or was
released, or when its holder is known to be dead; every grant increments the
token. The holder renews the expiry every TTL/3 while it holds the lease. A
holder that stops renewing (hung, SIGSTOPped, partitioned) loses the lease once
the TTL passes; its later writes are refused inside their transaction because
:func:`check_token` finds a newer token (``LEASE_FENCED``), and a renewal that
finds the token changed tells the Host to stop driving at once.

A ``flock`` survives only as a local liveness hint: each lease manager holds an
exclusive lock on its own *beacon* file for its lifetime. When the row names a
holder on this machine whose beacon can be locked, that holder's process is
gone (the kernel drops a flock when its holder dies, even by SIGKILL), so its
lease is taken over at once instead of after the TTL. The hint can only make a
takeover earlier, never let two writers commit: the token still fences the old
holder. See ``docs/decisions/0070-leases-expire.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from contracts import (
    Custody,
    CustodyPreview,
    CustodyVerdict,
    DeliveryId,
    ErrorCode,
    ExecsysError,
    ExecutionSite,
    RestoreResult,
    SavepointId,
    SavepointInfo,
    SignedCapability,
    WorkspaceMode,
    error,
)
from host.storage import Storage, StorageTx, fenced

MIN_RENEW_S = 0.01
"""Shortest renewal interval, whatever the TTL."""


def holder_name(tag: str) -> str:
    """A holder identity: ``host:pid:tag`` (the host part decides whether the hint applies)."""
    return f"{socket.gethostname()}:{os.getpid()}:{tag}"


LEASE_COUNTS = ("granted", "renewed", "lost", "fenced")
"""What a lease manager counts: grants, renewals, renewals that found the lease taken over,
and writes refused by fencing."""


def check_token(
    tx: StorageTx, delivery: str, token: int | None, counts: dict[str, int] | None = None
) -> None:
    """Refuse the write in progress in ``tx`` unless ``token`` is the delivery's current one."""
    found = tx.fencing_token(delivery)
    if token is None or found is None or found != token:
        if counts is not None:
            counts["fenced"] += 1
        raise fenced(delivery, found)


class LeaseManager:
    """Grants, renews and releases per-delivery leases for one Host instance."""

    def __init__(
        self,
        store: Storage,
        lock_dir: Path,
        holder: str,
        ttl_s: float,
        on_lost: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.lock_dir = lock_dir
        self.holder = holder
        self.ttl_s = ttl_s
        self.on_lost = on_lost
        """Called (on the event loop) when a renewal finds the lease taken over."""
        self._held: dict[str, int] = {}
        """delivery -> the token this manager holds."""
        self._lost: set[str] = set()
        self._confirmed: dict[str, float] = {}
        """delivery -> monotonic time until which :meth:`check` may answer from memory."""
        self._renewers: dict[str, asyncio.Task[None]] = {}
        self._mutex = threading.Lock()
        """Orders renewals against release: nothing renews a lease after it is given back."""
        self._beacon: int | None = None
        self.counts: dict[str, int] = dict.fromkeys(LEASE_COUNTS, 0)
        """Since this manager was created (see ``LEASE_COUNTS``)."""

    # --- the liveness hint ------------------------------------------------------------

    def _beacon_path(self, holder: str) -> Path:
        name = hashlib.sha256(holder.encode()).hexdigest()[:24]
        return self.lock_dir / "holders" / f"{name}.lock"

    def _light_beacon(self) -> None:
        """Lock our beacon before any row names us (so 'unlocked' always means 'gone')."""
        if self._beacon is not None:
            return
        path = self._beacon_path(self.holder)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._beacon = fd

    def _gone(self, holder: str) -> bool:
        """Whether ``holder`` is a process of this machine that no longer runs."""
        if holder.rsplit(":", 2)[0] != socket.gethostname() or holder == self.holder:
            return False
        path = self._beacon_path(holder)
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            return False  # no beacon here: only the expiry can tell
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        else:
            # Kept: the file is the evidence for every lease the dead holder left.
            fcntl.flock(fd, fcntl.LOCK_UN)
            return True
        finally:
            os.close(fd)

    # --- grant, renew, release ---------------------------------------------------------

    def acquire(self, delivery: str, *, wait_s: float = 0.0) -> int:
        """Take the delivery's lease (waiting up to ``wait_s``); return the new fencing token.

        Called from a running event loop, it also starts the renewal task that
        keeps the lease alive until :meth:`release`.
        """
        self._light_beacon()
        deadline = time.monotonic() + wait_s
        while True:
            started = time.monotonic()
            with self._mutex:
                self._refuse_held(delivery)
                token = self._grant(delivery)
                if token is not None:
                    self._granted(delivery, token, started)
                    break
            if time.monotonic() >= deadline:
                raise error(
                    ErrorCode.LEASE_HELD,
                    "another runner holds this delivery's lease",
                    path=delivery,
                    expected="the other runner to finish, its lease to expire, or 'execsys stop'",
                )
            time.sleep(0.01)
        self._renew_from_loop(delivery, token)
        return token

    def acquire_new(self, delivery: str) -> int | None:
        """Take the lease of a delivery the store does not know, in one write.

        Returns token 1, or None when the delivery is stored or its lease was
        ever granted (nothing is written then: use :meth:`acquire`). The
        admission of a new delivery needs no more than this.
        """
        self._light_beacon()
        started = time.monotonic()
        with self._mutex:
            self._refuse_held(delivery)
            if not self.store.grant_first_lease(delivery, self.holder, time.time() + self.ttl_s):
                return None
            self._granted(delivery, 1, started)
        self._renew_from_loop(delivery, 1)
        return 1

    def _refuse_held(self, delivery: str) -> None:
        if delivery in self._held:
            raise error(
                ErrorCode.LEASE_HELD,
                "this Host already drives the delivery",
                path=delivery,
                expected="one operation at a time per delivery",
            )

    def _granted(self, delivery: str, token: int, started: float) -> None:
        self.counts["granted"] += 1
        self._held[delivery] = token
        self._lost.discard(delivery)
        self._confirm(delivery, started)

    def _renew_from_loop(self, delivery: str, token: int) -> None:
        with contextlib.suppress(RuntimeError):  # no running loop: nobody to renew for
            loop = asyncio.get_running_loop()
            self._renewers[delivery] = loop.create_task(self._keep(delivery, token))

    def _grant(self, delivery: str) -> int | None:
        with self.store.lease_transaction() as tx:
            row = tx.lease(delivery)
            now = time.time()
            gone = row is not None and self._gone(row.holder)
            if row is not None and row.expires > now and not gone:
                return None
            token = (row.token if row else 0) + 1
            tx.put_lease(delivery, self.holder, token, now + self.ttl_s)
            if gone and row is not None and not tx.holder_has_leases(row.holder):
                # No lease names the dead holder any more: its beacon is garbage.
                with contextlib.suppress(OSError):
                    self._beacon_path(row.holder).unlink()
        return token

    def renew(self, delivery: str) -> bool:
        """Push the expiry one TTL ahead; False if the lease was taken over meanwhile.

        An expired lease nobody took is still ours (its token is unchanged), so
        it is renewed too. A store error is not a loss: the next renewal retries.
        """
        with self._mutex:
            token = self._held.get(delivery)
            if token is None:
                return True  # released: nothing to renew
            started = time.monotonic()
            try:
                with self.store.lease_transaction() as tx:
                    renewed = tx.renew_lease(delivery, self.holder, token, time.time() + self.ttl_s)
            except self.store.errors:
                return True
            if not renewed:
                self.counts["lost"] += 1
                self._lost.add(delivery)
                self._confirmed.pop(delivery, None)
            else:
                self.counts["renewed"] += 1
                self._confirm(delivery, started)
            return renewed

    def _confirm(self, delivery: str, started: float) -> None:
        """The store just confirmed our lease, by a write begun at monotonic ``started``.

        Nobody can be granted the lease before its expiry, ``started + ttl_s`` at
        the earliest, while this process lives (its beacon stays locked), so for
        the first half of that :meth:`check` need not ask the store. The other
        half is the allowance for a rival machine whose clock runs ahead.
        """
        self._confirmed[delivery] = started + self.ttl_s / 2

    async def _keep(self, delivery: str, token: int) -> None:
        interval = max(self.ttl_s / 3, MIN_RENEW_S)
        while self._held.get(delivery) == token:
            await asyncio.sleep(interval)
            if not await asyncio.to_thread(self.renew, delivery):
                if self.on_lost is not None:
                    self.on_lost(delivery)
                return

    def lost(self, delivery: str) -> bool:
        """Whether a renewal found the delivery's lease taken over by another holder."""
        return delivery in self._lost

    def token(self, delivery: str) -> int | None:
        """The token this manager holds for ``delivery``, if any."""
        return self._held.get(delivery)

    @contextlib.contextmanager
    def transaction(self, delivery: str, *, writes_only: bool = False) -> Iterator[StorageTx]:
        """A store write transaction that first proves we still hold the lease.

        With ``writes_only`` (a body that reads nothing back, the admission of a
        delivery) the store may send the check and the writes as one statement
        (:meth:`Storage.fenced_transaction`).
        """
        token = self._held.get(delivery)
        if not writes_only or token is None:
            with self.store.transaction() as tx:
                check_token(tx, delivery, token, self.counts)
                yield tx
            return
        try:
            with self.store.fenced_transaction(delivery, token) as tx:
                yield tx
        except ExecsysError as exc:
            if exc.code is ErrorCode.LEASE_FENCED:
                self.counts["fenced"] += 1
            raise

    def release(self, delivery: str) -> None:
        """Give the lease back: the next acquirer need not wait for the expiry.

        The token stays, so a late write by us is still fenced; a lease already
        taken over is left alone.
        """
        renewer = self._renewers.pop(delivery, None)
        if renewer is not None:
            renewer.cancel()
        with self._mutex:
            token = self._held.pop(delivery, None)
            self._confirmed.pop(delivery, None)
            if token is None:
                return
            with contextlib.suppress(*self.store.errors), self.store.lease_transaction() as tx:
                tx.release_lease(delivery, self.holder, token)

    # --- views ---------------------------------------------------------------------------

    def state(self, delivery: str) -> dict[str, Any]:
        """The lease as others see it: holder, token, expiry and whether it is live.

        ``state`` is ``held`` (a live holder), ``expired`` (its holder stopped
        renewing), ``gone`` (its holder's process on this machine is dead),
        ``released`` or ``free`` (never granted).
        """
        row = self.store.lease(delivery)
        if row is None:
            return {"state": "free", "holder": None, "token": 0, "expires": None}
        holder, token, expires = row
        if self._held.get(delivery) == token:
            state = "held"
        elif expires == 0:
            state = "released"
        elif expires <= time.time():
            state = "expired"
        elif self._gone(holder):
            state = "gone"
        else:
            state = "held"
        return {"state": state, "holder": holder, "token": token, "expires": expires or None}

    def check(self, delivery: str) -> None:
        """Raise ``LEASE_FENCED`` unless we still hold the delivery's lease.

        A read of the lease row, unless the store confirmed the lease (its grant
        or a renewal) less than half a TTL ago: no rival can hold it yet, and a
        holder that hung longer than that asks the store again.
        """
        token = self._held.get(delivery)
        if (
            token is not None
            and delivery not in self._lost
            and time.monotonic() < self._confirmed.get(delivery, 0.0)
        ):
            return
        row = self.store.lease(delivery)
        if token is None or row is None or row.token != token:
            self.counts["fenced"] += 1
            raise fenced(delivery, row.token if row else None)

    def is_free(self, delivery: str) -> bool:
        """Whether nobody holds a live lease on the delivery now (a probe, not a grant)."""
        return bool(self.state(delivery)["state"] != "held")

    def close(self) -> None:
        """Release every lease this instance holds, then put out the beacon."""
        for delivery in list(self._held):
            self.release(delivery)
        if self._beacon is not None:
            with contextlib.suppress(OSError):
                self._beacon_path(self.holder).unlink()
            os.close(self._beacon)
            self._beacon = None


class FencedCustody:
    """Custody as a lease holder may use it: no custody write once the lease is lost.

    Custody keeps its own files, outside the store's transactions, so the token
    cannot fence its writes. Checking the lease right before each one leaves
    only the instant between check and write, instead of the whole hang of a
    stale holder (whose executor's reply may be handled before its first
    renewal notices the takeover). The check reads the store unless it confirmed
    the lease less than half a TTL ago (decision 0131).
    """

    def __init__(self, custody: Custody, leases: LeaseManager) -> None:
        self.custody = custody
        self.leases = leases

    def open(self, delivery: DeliveryId, seed: str | None = None) -> SavepointId:
        """Delegate (checked first)."""
        self.leases.check(delivery)
        return self.custody.open(delivery, seed)

    def workspace(self, delivery: DeliveryId) -> str:
        """Delegate."""
        return self.custody.workspace(delivery)

    def head(self, delivery: DeliveryId) -> SavepointId:
        """Delegate."""
        return self.custody.head(delivery)

    def issue(
        self,
        site: ExecutionSite,
        mode: WorkspaceMode,
        paths: tuple[str, ...] = (),
        ttl_s: float = 3600.0,
        *,
        protected: tuple[str, ...] = (),
    ) -> SignedCapability:
        """Delegate."""
        return self.custody.issue(site, mode, paths, ttl_s, protected=protected)

    def validate(self, preview: CustodyPreview) -> CustodyVerdict:
        """Delegate (checked first: an accepted verdict records a savepoint)."""
        self.leases.check(preview.site.delivery)
        return self.custody.validate(preview)

    def advance(self, delivery: DeliveryId, savepoint: SavepointId) -> None:
        """Delegate (checked first)."""
        self.leases.check(delivery)
        self.custody.advance(delivery, savepoint)

    def restore(self, delivery: DeliveryId, savepoint: SavepointId) -> RestoreResult:
        """Delegate (checked first)."""
        self.leases.check(delivery)
        return self.custody.restore(delivery, savepoint)

    def savepoints(self, delivery: DeliveryId) -> list[SavepointInfo]:
        """Delegate."""
        return self.custody.savepoints(delivery)

    def retire(self, delivery: DeliveryId) -> None:
        """Delegate (checked first)."""
        self.leases.check(delivery)
        self.custody.retire(delivery)
