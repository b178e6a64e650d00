"""Per-delivery custody records on disk: head, savepoint log, manifests, nonces, stat cache.

Layout under ``<root>/deliveries/<delivery>/``::

    head               the head savepoint id (atomic replace + fsync)
    savepoints.jsonl   append-only log of SavepointInfo, oldest first
    nonces             append-only log of capability nonces used by accepted commits
    exclude.json       folder names left out of every tree of the delivery (set at open)
    manifests/<hex>    canonical manifest of each recorded savepoint
    statcache.json     (size, mtime_ns, inode, ctime_ns) -> digest; a cache, never trusted
                       for anything but skipping a re-read

The head file is read on its own (:meth:`DeliveryState.head`) so that a host
starting up sees custody's view independently of its checkpoint.

The files are the only truth. What this process keeps in memory only spares it
re-reading what it has already read: the append-only logs are indexed up to a
byte offset and only their new tail is read (any other process's appends
included), a log that was replaced or truncated (a retired and reopened
delivery) is read again from the start, and a record is rewritten only when its
content would change (see ``docs/decisions/0100-custody-records-read-incrementally.md``).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import threading
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from pathlib import Path
from typing import Generic, TypeVar

from contracts import ErrorCode, SavepointId, SavepointInfo, canonical_bytes
from execution_system.custody._blobs import hex_of
from execution_system.custody._durable import (
    append_line,
    atomic_write,
    file_lock,
    fsync_dir,
)
from execution_system.custody._tree import CacheRow, Refusal, printable

#: Checked delivery folders remembered (a path join and a pattern match per call otherwise).
_FOLDER_MEMORY = 4096

#: Format tag of ``exclude.json``.
_EXCLUDE_FORMAT = "execution-system/custody-exclude/v1"

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


_T = TypeVar("_T")

#: A file's identity and version as far as this process can tell: device, inode, size, mtime.
_Identity = tuple[int, int, int, int]


def _identity(st: os.stat_result) -> _Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _read_small(path: str) -> bytes:
    """The whole content of a small file, through one descriptor (``FileNotFoundError``)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = [os.read(fd, 4096)]
        if len(chunks[0]) == 4096:  # larger than any head: read to the end
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


class LogIndex(Generic[_T]):
    """The parsed complete lines of one append-only log, read incrementally.

    :meth:`refresh` reads only the bytes appended since the last call. If the
    file was replaced (another inode, or another first line: an inode number
    can be reused by a log created after a retire, which is why every log
    starts with a random header line, see :func:`log_header`) or is shorter
    than what was read, it is read again from the start; if it is gone, the
    index is empty. A torn last line (no newline yet) is left unread until a
    writer closes it, exactly as a full read would skip it. ``parse`` returns
    None for a line to skip (the header included).
    """

    def __init__(
        self, path: Path, parse: Callable[[str], _T | None], key: Callable[[_T], str]
    ) -> None:
        self._path = path
        self._parse = parse
        self._key = key
        self._lock = threading.Lock()
        self._file: tuple[int, int] | None = None
        self._first = b""
        self._offset = 0
        self.items: list[_T] = []
        """Parsed lines, oldest first."""
        self.keys: set[str] = set()
        """The key of every parsed line (for membership)."""

    def refresh(self) -> LogIndex[_T]:
        """Catch up with the file; return self."""
        with self._lock:
            try:
                fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                self._reset(None)
                return self
            try:
                st = os.fstat(fd)
                file = (st.st_dev, st.st_ino)
                if (
                    file != self._file
                    or st.st_size < self._offset
                    or os.pread(fd, len(self._first), 0) != self._first
                ):
                    self._reset(file)
                if st.st_size > self._offset:
                    data = os.pread(fd, st.st_size - self._offset, self._offset)
                    end = data.rfind(b"\n") + 1
                    if not self._offset:
                        self._first = data[: data.find(b"\n") + 1]
                    self._offset += end
                    for raw in data[:end].split(b"\n"):
                        if raw:
                            item = self._parse(raw.decode("utf-8", errors="replace"))
                            if item is not None:
                                self.items.append(item)
                                self.keys.add(self._key(item))
            finally:
                os.close(fd)
            return self

    def _reset(self, file: tuple[int, int] | None) -> None:
        self._file = file
        self._first = b""
        self._offset = 0
        self.items = []
        self.keys = set()


def log_header(kind: str) -> str:
    """The first line of a new log: names it and makes this incarnation of it unique."""
    return json.dumps({"log": f"execution-system/custody-{kind}/v1", "id": secrets.token_hex(16)})


def _same(line: str) -> str:
    return line


def _savepoint_line(line: str) -> SavepointInfo | None:
    try:
        return SavepointInfo.model_validate_json(line)
    except ValueError:
        return None


class DeliveryState:
    """The records of every delivery under one custody root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        """The ``deliveries`` directory."""
        self._locks = root.parent / "locks"
        self._folders: dict[str, Path] = {}
        self._strings: dict[str, str] = {}
        """delivery -> its folder as a string (paths of the per-step files are joined to it)."""
        self._nonces: dict[str, LogIndex[str]] = {}
        self._savepoints: dict[str, LogIndex[SavepointInfo]] = {}
        self._written_heads: dict[str, tuple[SavepointId, _Identity]] = {}
        """delivery -> the head this process wrote durably, and the file it wrote."""
        self._exclusions: dict[str, frozenset[str]] = {}
        self._caches: dict[str, tuple[_Identity, dict[str, CacheRow]]] = {}
        """delivery -> the stat cache file last read or written, and its content."""

    def _nonce_log(self, delivery: str) -> LogIndex[str]:
        index = self._nonces.get(delivery)
        if index is None:
            path = self.folder(delivery) / "nonces"
            index = self._nonces.setdefault(delivery, LogIndex(path, _same, _same))
        return index.refresh()

    def _savepoint_log(self, delivery: str) -> LogIndex[SavepointInfo]:
        index = self._savepoints.get(delivery)
        if index is None:
            path = self.folder(delivery) / "savepoints.jsonl"
            log = LogIndex(path, _savepoint_line, lambda info: str(info.savepoint))
            index = self._savepoints.setdefault(delivery, log)
        return index.refresh()

    def folder(self, delivery: str) -> Path:
        """The delivery's record folder."""
        folder = self._folders.get(delivery)
        if folder is None:
            folder = self.root / check_delivery(delivery)
            if len(self._folders) < _FOLDER_MEMORY:
                self._folders[delivery] = folder
        return folder

    def _file(self, delivery: str, name: str) -> str:
        """The path of a file in the delivery's folder, as a string (cheaper than a ``Path``)."""
        folder = self._strings.get(delivery)
        if folder is None:
            folder = os.fspath(self.folder(delivery))
            if len(self._strings) < _FOLDER_MEMORY:
                self._strings[delivery] = folder
        return f"{folder}/{name}"

    @contextmanager
    def lock(self, delivery: str) -> Iterator[None]:
        """Serialize every head-moving or tree-scanning operation of one delivery."""
        # Lock files live outside the delivery folder so retiring never deletes one
        # that another process is waiting on.
        path = f"{os.fspath(self._locks)}/{check_delivery(delivery)}.lock"
        with file_lock(path, exclusive=True):
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
            text = _read_small(self._file(delivery, "head")).decode("ascii").strip()
        except FileNotFoundError:
            return None
        return SavepointId(text)

    def set_head(self, delivery: str, savepoint: SavepointId) -> None:
        """Move the head durably.

        Nothing is written when the head file is still the one this process
        wrote durably with the same savepoint (an unchanged workspace).
        """
        path = self.folder(delivery) / "head"
        written = self._written_heads.get(delivery)
        if written is not None and written[0] == savepoint:
            try:
                if _identity(os.stat(path)) == written[1]:
                    return
            except FileNotFoundError:
                pass
        atomic_write(path, savepoint.encode("ascii") + b"\n")
        self._written_heads[delivery] = (savepoint, _identity(os.stat(path)))

    # --- manifests and the savepoint log ------------------------------------------

    def _manifest_path(self, delivery: str, savepoint: str) -> Path:
        return self.folder(delivery) / "manifests" / hex_of(savepoint)

    def has_manifest(self, delivery: str, savepoint: str) -> bool:
        """Whether ``savepoint`` is recorded for this delivery."""
        try:
            return os.path.isfile(self._file(delivery, f"manifests/{hex_of(savepoint)}"))
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
        if info.savepoint not in self._savepoint_log(delivery).keys:
            line = canonical_bytes(info.model_dump(mode="json")).decode("utf-8")
            append_line(
                self.folder(delivery) / "savepoints.jsonl", line, header=log_header("savepoints")
            )

    def savepoints(self, delivery: str) -> list[SavepointInfo]:
        """The savepoint log, oldest first (a torn last line is skipped)."""
        return list(self._savepoint_log(delivery).items)

    def rewrite_savepoints(self, delivery: str, kept: list[SavepointInfo]) -> None:
        """Replace the savepoint log by one holding only ``kept`` (atomically, durably).

        The new log starts with a fresh header, so every reader (this process's
        index and any other's) sees a replaced file and reads it again.
        """
        lines = [log_header("savepoints")]
        lines += [canonical_bytes(info.model_dump(mode="json")).decode("utf-8") for info in kept]
        path = self.folder(delivery) / "savepoints.jsonl"
        atomic_write(path, ("\n".join(lines) + "\n").encode("utf-8"))

    def drop_manifests(self, delivery: str, kept: AbstractSet[str]) -> int:
        """Delete every stored manifest whose savepoint is not in ``kept``; how many."""
        folder = self.folder(delivery) / "manifests"
        if not folder.is_dir():
            return 0
        wanted = {hex_of(savepoint) for savepoint in kept}
        dropped = 0
        for path in sorted(folder.iterdir()):
            if path.name.startswith(".") or path.name in wanted:
                continue
            path.unlink(missing_ok=True)
            dropped += 1
        if dropped:
            fsync_dir(folder)
        return dropped

    def manifests(self, delivery: str) -> Iterator[bytes]:
        """Every stored manifest of the delivery (for blob reference counting)."""
        folder = self.folder(delivery) / "manifests"
        if folder.is_dir():
            for path in folder.iterdir():
                if not path.name.startswith("."):
                    yield path.read_bytes()

    # --- nonces -------------------------------------------------------------------

    def used_nonces(self, delivery: str) -> set[str]:
        """Nonces of capabilities whose commit custody already accepted (read-only view).

        Read from the durable log on every call; only its new tail is parsed.
        """
        return self._nonce_log(delivery).keys

    def use_nonce(self, delivery: str, nonce: str) -> None:
        """Record a nonce as used, durably, before the acceptance is returned."""
        append_line(self._file(delivery, "nonces"), nonce, header=log_header("nonces"))

    # --- exclusions ------------------------------------------------------------------

    def recorded_exclusions(self, delivery: str) -> frozenset[str] | None:
        """The folder names the delivery's trees leave out, as recorded at open.

        None if nothing is recorded (a delivery opened before exclusions were
        recorded: its trees exclude nothing). Recorded once, never changed, so
        remembered after the first read.
        """
        known = self._exclusions.get(delivery)
        if known is not None:
            return known
        try:
            document = json.loads((self.folder(delivery) / "exclude.json").read_bytes())
        except FileNotFoundError:
            return None
        if not isinstance(document, dict) or document.get("format") != _EXCLUDE_FORMAT:
            raise ValueError("exclude.json is not a custody exclusion record")
        names = frozenset(str(name) for name in document["names"])
        self._exclusions[delivery] = names
        return names

    def exclusions(self, delivery: str) -> frozenset[str]:
        """:meth:`recorded_exclusions`, with nothing recorded meaning nothing excluded."""
        return self.recorded_exclusions(delivery) or frozenset()

    def record_exclusions(self, delivery: str, names: frozenset[str]) -> None:
        """Record the exclusions of a delivery being opened (durably, before its first scan)."""
        document = {"format": _EXCLUDE_FORMAT, "names": sorted(names)}
        atomic_write(self.folder(delivery) / "exclude.json", canonical_bytes(document))
        self._exclusions[delivery] = names

    # --- stat cache -----------------------------------------------------------------

    def load_cache(self, delivery: str) -> dict[str, CacheRow]:
        """The stat cache (empty if missing or unreadable: it is only an optimization).

        The returned mapping must not be modified. It is parsed again only when
        the file is not the one this process last read or wrote.
        """
        path = self.folder(delivery) / "statcache.json"
        try:
            with path.open("rb") as handle:
                seen = _identity(os.fstat(handle.fileno()))
                known = self._caches.get(delivery)
                if known is not None and known[0] == seen:
                    return known[1]
                raw = json.loads(handle.read())
            cache = {
                path: (int(r[0]), int(r[1]), int(r[2]), int(r[3]), str(r[4]))
                for path, r in raw.items()
            }
        except (OSError, ValueError, TypeError, IndexError, AttributeError):
            return {}
        self._caches[delivery] = (seen, cache)
        return cache

    def save_cache(self, delivery: str, cache: dict[str, CacheRow]) -> None:
        """Replace the stat cache unless it is unchanged (no fsync: losing it costs a re-read)."""
        path = self.folder(delivery) / "statcache.json"
        known = self._caches.get(delivery)
        if known is not None and known[1] == cache:
            try:
                if _identity(os.stat(path)) == known[0]:
                    return
            except FileNotFoundError:
                pass
        tmp = path.with_name(f".statcache.{os.getpid()}.tmp")
        tmp.write_bytes(json.dumps(cache, separators=(",", ":")).encode("utf-8"))
        os.replace(tmp, path)
        self._caches[delivery] = (_identity(os.stat(path)), dict(cache))

    # --- lifecycle --------------------------------------------------------------------

    def create(self, delivery: str) -> bool:
        """Create the delivery's folder (durably); whether it was created by this call."""
        folder = self.folder(delivery)
        if folder.is_dir():
            return False
        folder.mkdir(parents=True)
        fsync_dir(folder.parent)
        return True

    def remove(self, delivery: str) -> None:
        """Delete every record of the delivery."""
        folder = self.folder(delivery)
        if folder.exists():
            # Head first: a crash mid-removal leaves a delivery that reads as retired.
            (folder / "head").unlink(missing_ok=True)
            shutil.rmtree(folder)
            fsync_dir(self.root)
        memories = (
            self._strings,
            self._nonces,
            self._savepoints,
            self._written_heads,
            self._caches,
            self._exclusions,
        )
        for memory in memories:
            memory.pop(delivery, None)
