"""Per-delivery custody records on disk: head, savepoint log, manifests, nonces, stat cache.

Layout under ``<root>/deliveries/<delivery>/``::

    head               the head savepoint id (atomic replace + fsync)
    savepoints.jsonl   append-only log of SavepointInfo, oldest first
    nonces             append-only log of capability nonces used by accepted commits
    manifests/<hex>    canonical manifest of each recorded savepoint
    statcache.json     (size, mtime_ns, inode, ctime_ns) -> digest; a cache, never trusted
                       for anything but skipping a re-read

The head file is read on its own (:meth:`DeliveryState.head`) so that a host
starting up sees custody's view independently of its checkpoint.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contracts import ErrorCode, SavepointId, SavepointInfo, canonical_bytes
from execution_system.custody._blobs import hex_of
from execution_system.custody._durable import (
    append_line,
    atomic_write,
    file_lock,
    fsync_dir,
    read_lines,
)
from execution_system.custody._tree import CacheRow, Refusal, printable

#: Delivery ids become directory names: keep them to a safe, portable alphabet.
_DELIVERY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_delivery(delivery: str) -> str:
    """Return ``delivery`` if it is safe as a directory name (``Refusal`` otherwise)."""
    if not _DELIVERY_ID.fullmatch(delivery) or ".." in delivery:
        raise Refusal(
            ErrorCode.CUSTODY_PATH_TRAVERSAL,
            printable(delivery),
            "a delivery id must be 1-128 of [A-Za-z0-9._-], start alphanumeric, without '..'",
        )
    return delivery


class DeliveryState:
    """The records of every delivery under one custody root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        """The ``deliveries`` directory."""
        self._locks = root.parent / "locks"

    def folder(self, delivery: str) -> Path:
        """The delivery's record folder."""
        return self.root / check_delivery(delivery)

    @contextmanager
    def lock(self, delivery: str) -> Iterator[None]:
        """Serialize every head-moving or tree-scanning operation of one delivery."""
        # Lock files live outside the delivery folder so retiring never deletes one
        # that another process is waiting on.
        with file_lock(self._locks / f"{check_delivery(delivery)}.lock", exclusive=True):
            yield

    def deliveries(self) -> list[str]:
        """Every delivery with records."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())

    # --- head -------------------------------------------------------------------

    def head(self, delivery: str) -> SavepointId | None:
        """The durable head, or None if the delivery was never opened (or is retired)."""
        try:
            text = (self.folder(delivery) / "head").read_text("ascii").strip()
        except FileNotFoundError:
            return None
        return SavepointId(text)

    def set_head(self, delivery: str, savepoint: SavepointId) -> None:
        """Move the head durably."""
        atomic_write(self.folder(delivery) / "head", savepoint.encode("ascii") + b"\n")

    # --- manifests and the savepoint log ------------------------------------------

    def _manifest_path(self, delivery: str, savepoint: str) -> Path:
        return self.folder(delivery) / "manifests" / hex_of(savepoint)

    def has_manifest(self, delivery: str, savepoint: str) -> bool:
        """Whether ``savepoint`` is recorded for this delivery."""
        try:
            return self._manifest_path(delivery, savepoint).is_file()
        except ValueError:
            return False

    def manifest(self, delivery: str, savepoint: str) -> bytes | None:
        """The stored manifest bytes of ``savepoint`` for this delivery, if recorded."""
        try:
            return self._manifest_path(delivery, savepoint).read_bytes()
        except (FileNotFoundError, ValueError):
            return None

    def record(self, delivery: str, manifest: bytes, info: SavepointInfo) -> None:
        """Store a manifest (blobs must already be durable) and log the savepoint once."""
        path = self._manifest_path(delivery, info.savepoint)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, manifest)
        if all(known.savepoint != info.savepoint for known in self.savepoints(delivery)):
            line = canonical_bytes(info.model_dump(mode="json")).decode("utf-8")
            append_line(self.folder(delivery) / "savepoints.jsonl", line)

    def savepoints(self, delivery: str) -> list[SavepointInfo]:
        """The savepoint log, oldest first (a torn last line is skipped)."""
        infos = []
        for line in read_lines(self.folder(delivery) / "savepoints.jsonl"):
            try:
                infos.append(SavepointInfo.model_validate_json(line))
            except ValueError:
                continue
        return infos

    def manifests(self, delivery: str) -> Iterator[bytes]:
        """Every stored manifest of the delivery (for blob reference counting)."""
        folder = self.folder(delivery) / "manifests"
        if folder.is_dir():
            for path in folder.iterdir():
                if not path.name.startswith("."):
                    yield path.read_bytes()

    # --- nonces -------------------------------------------------------------------

    def used_nonces(self, delivery: str) -> set[str]:
        """Nonces of capabilities whose commit custody already accepted."""
        return set(read_lines(self.folder(delivery) / "nonces"))

    def use_nonce(self, delivery: str, nonce: str) -> None:
        """Record a nonce as used, durably, before the acceptance is returned."""
        append_line(self.folder(delivery) / "nonces", nonce)

    # --- stat cache -----------------------------------------------------------------

    def load_cache(self, delivery: str) -> dict[str, CacheRow]:
        """The stat cache (empty if missing or unreadable: it is only an optimization)."""
        try:
            raw = json.loads((self.folder(delivery) / "statcache.json").read_bytes())
            return {
                path: (int(r[0]), int(r[1]), int(r[2]), int(r[3]), str(r[4]))
                for path, r in raw.items()
            }
        except (OSError, ValueError, TypeError, IndexError, AttributeError):
            return {}

    def save_cache(self, delivery: str, cache: dict[str, CacheRow]) -> None:
        """Replace the stat cache (no fsync: losing it only costs a re-read)."""
        path = self.folder(delivery) / "statcache.json"
        tmp = path.with_name(f".statcache.{os.getpid()}.tmp")
        tmp.write_bytes(json.dumps(cache, separators=(",", ":")).encode("utf-8"))
        os.replace(tmp, path)

    # --- lifecycle --------------------------------------------------------------------

    def create(self, delivery: str) -> None:
        """Create the delivery's folder (durably)."""
        folder = self.folder(delivery)
        if not folder.is_dir():
            folder.mkdir(parents=True)
            fsync_dir(folder.parent)

    def remove(self, delivery: str) -> None:
        """Delete every record of the delivery."""
        folder = self.folder(delivery)
        if folder.exists():
            # Head first: a crash mid-removal leaves a delivery that reads as retired.
            (folder / "head").unlink(missing_ok=True)
            shutil.rmtree(folder)
            fsync_dir(self.root)
