"""One writer per delivery: an OS file lock plus a fencing token in the store.

On one machine the ``flock`` is the lease: the kernel drops it when its holder
dies (even by SIGKILL), so a crashed runner never locks an operator out. The
token, incremented on every acquisition and checked inside every checkpoint
transaction, fences off a holder that lost its lease but still tries to write
(the cross-machine case, where a lease row with an expiry takes the lock's
place). ``flock`` is used rather than ``fcntl`` record locks, which a process
loses when it closes *any* descriptor of the file.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from contracts import ErrorCode, error
from host.langgraph._store import Store


class LeaseManager:
    """Acquires and releases per-delivery leases for one Host instance."""

    def __init__(self, store: Store, lock_dir: Path, holder: str, ttl_s: float) -> None:
        self.store = store
        self.lock_dir = lock_dir
        self.holder = holder
        self.ttl_s = ttl_s
        self._fds: dict[str, int] = {}

    def acquire(self, delivery: str, *, wait_s: float = 0.0) -> int:
        """Take the delivery's lease (waiting up to ``wait_s``); return the fencing token."""
        if delivery in self._fds:
            raise error(
                ErrorCode.LEASE_HELD,
                "this Host already drives the delivery",
                path=delivery,
                expected="one operation at a time per delivery",
            )
        # Created on first use: a read-only Host (status, inspect) never creates folders.
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_dir / f"{delivery}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise error(
                        ErrorCode.LEASE_HELD,
                        "another runner is driving this delivery",
                        path=delivery,
                        expected="the other runner to finish, or 'execsys stop'",
                    ) from None
                time.sleep(0.01)
        try:
            known = self.store.read(
                "SELECT holder, token FROM execsys_leases WHERE delivery = ?", (delivery,)
            )
            if known and known[0][0] == self.holder:
                # Ours already: a token changes only when ownership changes hands.
                self._fds[delivery] = fd
                return int(known[0][1])
            with self.store.transaction() as cur:
                row = cur.execute(
                    "SELECT token FROM execsys_leases WHERE delivery = ?", (delivery,)
                ).fetchone()
                token = (int(row[0]) if row else 0) + 1
                cur.execute(
                    "INSERT INTO execsys_leases (delivery, holder, token, expires) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT(delivery) DO UPDATE SET "
                    "holder = excluded.holder, token = excluded.token, expires = excluded.expires",
                    (delivery, self.holder, token, time.time() + self.ttl_s),
                )
        except BaseException:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise
        self._fds[delivery] = fd
        return token

    def is_free(self, delivery: str) -> bool:
        """Whether no process holds the delivery's lock right now (a probe, not a lease)."""
        if delivery in self._fds:
            return False
        path = self.lock_dir / f"{delivery}.lock"
        if not path.exists():
            return True
        fd = os.open(path, os.O_RDONLY)  # flock needs no write access: a read-only store probes too
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return True
        finally:
            os.close(fd)

    def release(self, delivery: str) -> None:
        """Give the lease back (the token stays, so a late write by us is still fenced).

        On one machine the lock is the lease, so releasing it writes nothing: the
        row's expiry matters only to holders on other machines, which renew it.
        """
        fd = self._fds.pop(delivery, None)
        if fd is None:
            return
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def close(self) -> None:
        """Release every lease this instance holds."""
        for delivery in list(self._fds):
            self.release(delivery)
