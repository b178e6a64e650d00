"""Durable file primitives: atomic replace, fsync'd appends, parallel fsync, file locks.

Custody's promises (a head that survives a crash, a blob that is never half
written under its final name) rest on the classic POSIX sequence: write a
temporary file, ``fsync`` it, ``rename`` it over the target, ``fsync`` the
directory. Everything here is that sequence in one place.
"""

from __future__ import annotations

import fcntl
import os
import secrets
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

#: Concurrent fsyncs let the filesystem batch journal commits; measured on
#: ext4, 16 threads flush 2,000 small files about 5x faster than one.
_FSYNC_THREADS = 16


def temp_name(target: Path) -> Path:
    """A unique hidden sibling of ``target`` for staging its new content."""
    return target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")


def fsync_dir(path: Path) -> None:
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


def append_line(path: Path, line: str, *, header: str | None = None) -> None:
    """Append one line to a log and flush it.

    A crash can leave the last line torn (no newline). Before appending, such a
    fragment is closed with a newline so the new line stays parseable; readers
    skip the fragment. ``header`` is written as the first line of an empty log.
    """
    created = not path.exists()
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
    if created:
        fsync_dir(path.parent)


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
def file_lock(path: Path, *, exclusive: bool) -> Iterator[None]:
    """Hold an advisory ``flock`` on ``path`` (created if needed).

    ``flock`` locks belong to the open file description, so two threads of one
    process that each open the file exclude each other as two processes do.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except FileNotFoundError:  # the first lock under this root: create its folder
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, flags, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        # Closing the descriptor releases the lock.
        os.close(fd)
