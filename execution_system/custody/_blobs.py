"""The content-addressed blob store: each distinct file content stored once.

Layout: ``blobs/<first two hex>/<remaining 62 hex>``, named by the SHA-256 of
the content. New contents are staged in ``blobs/.staging`` and published by a
:class:`BlobBatch` in one step (flush all, rename all, flush the shard
directories), so a blob under its final name is always complete, and a
refused snapshot publishes nothing.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import threading
from pathlib import Path
from typing import BinaryIO

from execution_system.custody._durable import Flusher, fsync_dir, write_all
from host._faults import boundary

#: Read size for streaming copies and hashes.
CHUNK = 1 << 20

#: The digest spelling of ``contracts.Digest`` (``sha256:<64 lowercase hex>``).
DIGEST_PREFIX = "sha256:"

_HEX = frozenset("0123456789abcdef")


def hex_of(digest: str) -> str:
    """The 64 hex digits of a ``sha256:<hex>`` digest (raises on any other shape)."""
    if not digest.startswith(DIGEST_PREFIX):
        raise ValueError("not a sha256 digest")
    hexpart = digest[len(DIGEST_PREFIX) :]
    if len(hexpart) != 64 or not _HEX.issuperset(hexpart):
        raise ValueError("not a sha256 digest")
    return hexpart


class BlobStore:
    """Blobs under ``root``; safe to share between deliveries and processes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        """The ``blobs`` directory."""
        self.staging = root / ".staging"
        """Where new contents wait until their batch is published."""
        self._prefix = os.fspath(root) + os.sep

    def path(self, digest: str) -> Path:
        """Where the blob for ``digest`` lives (whether or not it exists)."""
        return Path(self._where(digest))

    def _where(self, digest: str) -> str:
        # Plain strings: this runs once per file on every snapshot.
        hexpart = hex_of(digest)
        return f"{self._prefix}{hexpart[:2]}{os.sep}{hexpart[2:]}"

    def has(self, digest: str) -> bool:
        """Whether the blob for ``digest`` is stored."""
        return os.path.isfile(self._where(digest))

    def open(self, digest: str) -> BinaryIO:
        """Open a stored blob for reading (``FileNotFoundError`` if absent)."""
        return self.path(digest).open("rb")

    def batch(self, *, retain: int = 0) -> BlobBatch:
        """Start staging new contents (keeping up to ``retain`` bytes of them in memory)."""
        return BlobBatch(self, retain=retain)

    def collect(self, keep: set[str]) -> int:
        """Delete every blob whose digest is not in ``keep``; return how many were deleted.

        The caller holds the exclusive store lock, so nothing is being staged,
        and leftovers of interrupted batches are deleted too.
        """
        deleted = 0
        if not self.root.is_dir():
            return 0
        shutil.rmtree(self.staging, ignore_errors=True)
        for shard in sorted(self.root.iterdir()):
            if shard.name == self.staging.name or not shard.is_dir():
                continue
            for blob in shard.iterdir():
                if f"{DIGEST_PREFIX}{shard.name}{blob.name}" not in keep:
                    boundary("custody-collect", "before")
                    blob.unlink(missing_ok=True)
                    deleted += 1
            if not any(shard.iterdir()):
                shard.rmdir()
        fsync_dir(self.root)
        return deleted


class BlobBatch:
    """Contents staged by one scan; published by :meth:`commit` or dropped by :meth:`discard`.

    Thread-safe: a scan hashes files on several threads.
    """

    def __init__(self, store: BlobStore, *, retain: int = 0) -> None:
        self._store = store
        self._staged: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._flusher: Flusher | None = None
        self._retain = retain
        self._kept: dict[str, bytes] = {}

    def wanted(self, digest: str) -> bool:
        """Whether ``digest`` is neither stored nor staged yet."""
        with self._lock:
            if digest in self._staged:
                return False
        return not self._store.has(digest)

    def _temp(self) -> tuple[int, Path]:
        with self._lock:
            if self._flusher is None:
                self._store.staging.mkdir(parents=True, exist_ok=True)
                # Opened before the first write, so it sees every write-back error after it.
                self._flusher = Flusher([self._store.staging])
        tmp = self._store.staging / secrets.token_hex(16)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        return os.open(tmp, flags, 0o444), tmp

    def _register(self, digest: str, tmp: Path) -> None:
        with self._lock:
            if digest in self._staged:
                duplicate = True
            else:
                self._staged[digest] = tmp
                duplicate = False
        if duplicate:
            tmp.unlink(missing_ok=True)

    def add_bytes(self, digest: str, data: bytes) -> None:
        """Stage ``data``, whose digest the caller has just computed."""
        fd, tmp = self._temp()
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        self._register(digest, tmp)
        if self._retain:
            with self._lock:
                if len(data) <= self._retain:
                    self._retain -= len(data)
                    self._kept[digest] = data

    def kept(self, digest: str) -> bytes | None:
        """The bytes staged for ``digest`` if this batch kept them in memory (see ``retain``)."""
        with self._lock:
            return self._kept.get(digest)

    def add_stream(self, source: BinaryIO) -> tuple[str, int]:
        """Stage the content read from ``source``; return its digest and size.

        The digest is computed over the bytes actually copied, so the stored
        blob always matches its name even if the source changed meanwhile.
        """
        fd, tmp = self._temp()
        sha = hashlib.sha256()
        size = 0
        try:
            while chunk := source.read(CHUNK):
                sha.update(chunk)
                size += len(chunk)
                write_all(fd, chunk)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        digest = DIGEST_PREFIX + sha.hexdigest()
        self._register(digest, tmp)
        return digest, size

    def source(self, digest: str) -> Path:
        """Where the content of ``digest`` can be read now: staged here, else the store."""
        with self._lock:
            staged = self._staged.get(digest)
        return staged if staged is not None else self._store.path(digest)

    def pending(self) -> list[Path]:
        """The staged, not yet published files (for a caller flushing them with its own)."""
        with self._lock:
            return list(self._staged.values())

    def commit(self, *, flushed: bool = False) -> None:
        """Publish every staged blob durably (flush, rename, flush directories).

        ``flushed``: the caller has already made the staged files durable
        (:meth:`pending`, flushed together with its own files).
        """
        with self._lock:
            staged, self._staged = self._staged, {}
            flusher, self._flusher = self._flusher, None
            self._kept = {}
        if flusher is None:  # nothing was ever staged
            return
        with flusher:
            if staged:
                self._publish(staged, flusher, flushed=flushed)

    def _publish(self, staged: dict[str, Path], flusher: Flusher, *, flushed: bool) -> None:
        if not flushed:
            flusher.files(list(staged.values()))
        shards: set[str] = set()
        new_shard = False
        for digest, tmp in staged.items():
            # Plain strings and one existence check per shard: a seed publishes 10,000.
            final = self._store._where(digest)
            shard = os.path.dirname(final)
            if shard not in shards:
                if not os.path.isdir(shard):
                    os.makedirs(shard, exist_ok=True)
                    new_shard = True
                shards.add(shard)
            os.replace(tmp, final)
        flusher.dirs(Path(shard) for shard in shards)
        if new_shard:
            fsync_dir(self._store.root)

    def discard(self) -> None:
        """Drop every staged content (the scan was refused or failed)."""
        with self._lock:
            staged, self._staged = self._staged, {}
            flusher, self._flusher = self._flusher, None
            self._kept = {}
        if flusher is not None:
            flusher.close()
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
