"""Durable file primitives: atomic replace, fsync'd appends, parallel fsync, file locks.

Custody's promises (a head that survives a crash, a blob that is never half
written under its final name) rest on the classic POSIX sequence: write a
temporary file, ``fsync`` it, ``rename`` it over the target, ``fsync`` the
directory. Everything here is that sequence in one place.

Many files written together (a seed, a whole-tree restore, a large snapshot)
are flushed by a :class:`Flusher`: one ``syncfs(2)`` per file system instead of
one ``fsync`` per file, where the kernel reports write-back errors through it.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import platform
import secrets
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

#: Concurrent fsyncs let the filesystem batch journal commits; measured on
#: ext4, 16 threads flush 2,000 small files about 5x faster than one.
_FSYNC_THREADS = 16

#: From this many files (or folders) on, a :class:`Flusher` uses one ``syncfs``
#: per file system instead of an ``fsync`` each: measured on ext4, 10,000 new
#: small files flush in 0.2 s with one ``syncfs``, in about 3 s with 16 threads
#: of ``fsync``.
SYNCFS_MIN = 128


def _load_syncfs() -> Callable[[int], int] | None:
    """``syncfs(2)`` where it reports write-back errors (Linux >= 5.8), else None.

    Before 5.8 ``syncfs`` returned 0 even when writing a file back failed, so a
    lost write could go unnoticed: there, and off Linux, every file is fsync'd.
    """
    if sys.platform != "linux":
        return None
    try:
        major, minor = (int(part) for part in platform.release().split(".")[:2])
        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (ValueError, OSError, AttributeError):
        return None
    if (major, minor) < (5, 8):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    return function


_syncfs = _load_syncfs()


class Flusher:
    """Makes many files written after its creation durable, one ``syncfs`` per file system.

    Create it *before* writing: each file system named through ``folders`` is
    opened then, and ``syncfs`` on that descriptor reports every write-back
    error of the file system since that moment, including one the kernel met
    while flushing these files in the background and another process then
    saw. A file on a file system that was not opened in advance, a batch under
    :data:`SYNCFS_MIN`, a kernel without a reliable ``syncfs`` or a ``syncfs``
    that fails all fall back to an ``fsync`` per file (which raises the error
    for the file it belongs to). Either way, when :meth:`files` or
    :meth:`dirs` returns, what was written to those paths is on disk.
    """

    def __init__(self, folders: Iterable[Path]) -> None:
        self._fds: dict[int, int] = {}
        if _syncfs is None:
            return
        for folder in folders:
            try:
                fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                continue
            device = os.fstat(fd).st_dev
            if device in self._fds:
                os.close(fd)
            else:
                self._fds[device] = fd

    def __enter__(self) -> Flusher:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Release the descriptors (idempotent)."""
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)

    def _sync(self, folders: Iterable[Path]) -> bool:
        if _syncfs is None:
            return False
        wanted: set[int] = set()
        try:
            for folder in folders:
                device = os.stat(folder).st_dev
                if device not in self._fds:
                    return False
                wanted.add(device)
        except OSError:
            return False
        return all(_syncfs(self._fds[device]) == 0 for device in sorted(wanted))

    def files(self, paths: list[Path]) -> None:
        """Flush the contents of ``paths`` (files; a file lives on its folder's file system)."""
        if len(paths) >= SYNCFS_MIN and self._sync({path.parent for path in paths}):
            return
        fsync_files(paths)

    def dirs(self, paths: Iterable[Path]) -> None:
        """Flush the entries of the folders ``paths`` (renames and creations inside them)."""
        unique = set(paths)
        if len(unique) >= SYNCFS_MIN and self._sync(unique):
            return
        fsync_dirs(unique)


def temp_name(target: Path) -> Path:
    """A unique hidden sibling of ``target`` for staging its new content."""
    return target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")


def fsync_dir(path: str | Path) -> None:
    """Flush a directory so the renames and creations inside it survive a crash."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dirs(paths: Iterable[Path]) -> None:
    """Flush several directories, each once (concurrently when there are many)."""
    unique = sorted(set(paths))
    if len(unique) < 8:
        for path in unique:
            fsync_dir(path)
        return
    with ThreadPoolExecutor(max_workers=_FSYNC_THREADS) as pool:
        # list() re-raises the first OSError, if any.
        list(pool.map(fsync_dir, unique))


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_files(paths: list[Path]) -> None:
    """Flush many files, concurrently when there are enough to be worth it."""
    if len(paths) < 8:
        for path in paths:
            _fsync_file(path)
        return
    with ThreadPoolExecutor(max_workers=_FSYNC_THREADS) as pool:
        # list() re-raises the first OSError, if any.
        list(pool.map(_fsync_file, paths))


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write fewer)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file."""
    tmp = temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def append_line(path: str | Path, line: str, *, header: str | None = None) -> None:
    """Append one line to a log and flush it.

    A crash can leave the last line torn (no newline). Before appending, such a
    fragment is closed with a newline so the new line stays parseable; readers
    skip the fragment. ``header`` is written as the first line of an empty log.
    An empty log's folder is flushed too: the file may have just been created
    (here, or by a writer that crashed before its first line).
    """
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        size = os.fstat(fd).st_size
        prefix = b""
        if size and os.pread(fd, 1, size - 1) != b"\n":
            prefix = b"\n"
        elif not size and header is not None:
            prefix = header.encode("utf-8") + b"\n"
        write_all(fd, prefix + line.encode("utf-8") + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    if not size:
        fsync_dir(os.path.dirname(path) or ".")


def read_lines(path: Path) -> list[str]:
    """The complete lines of a log written by :func:`append_line` (empty if absent)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")
    # The last element is either empty (clean end) or a torn fragment: drop it.
    return [raw.decode("utf-8", errors="replace") for raw in lines[:-1] if raw]


@contextmanager
def file_lock(path: str | Path, *, exclusive: bool) -> Iterator[None]:
    """Hold an advisory ``flock`` on ``path`` (created if needed).

    ``flock`` locks belong to the open file description, so two threads of one
    process that each open the file exclude each other as two processes do.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except FileNotFoundError:  # the first lock under this root: create its folder
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, flags, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        # Closing the descriptor releases the lock.
        os.close(fd)
