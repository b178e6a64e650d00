"""The candidate's source identity: one digest over every file's path, mode and content.

Used by the runtime's freeze and check agents, so the digest a check binds its
evidence to is computed exactly as the digest the freeze recorded.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from contracts import Digest, digest_of
from execution_system.custody import DEFAULT_EXCLUDED, protected_by

#: Folders that are never part of a candidate's identity, at any depth: the
#: same set custody leaves out of a seed (version control, venvs, caches).
EXCLUDED: frozenset[str] = DEFAULT_EXCLUDED

EXCLUDE_ENV = "EXECSYS_EXCLUDE"
"""A goal's own folder names to leave out as well (``goal create --exclude``),
comma-separated, in the environment of the runtime's roles."""


def excluded(extra: tuple[str, ...] | None = None) -> frozenset[str]:
    """The folder names a candidate's identity leaves out: the defaults and the goal's own.

    ``extra`` None: the goal's names from :data:`EXCLUDE_ENV` (a role's process).
    """
    if extra is None:
        extra = tuple(n for n in os.environ.get(EXCLUDE_ENV, "").split(",") if n)
    return EXCLUDED | frozenset(extra)


#: A file changed this close (ns) to a walk's start may change again within the
#: same timestamp tick unseen, so its stat row proves nothing (custody's rule).
RACY_NS = 50_000_000

#: Threads copying a tree into a scratch folder (file creation releases the GIL).
_COPY_THREADS = min(4, os.cpu_count() or 1)

#: (size, mtime_ns, inode, ctime_ns) of a file as a walk saw it.
StatKey = tuple[int, int, int, int]


def _key(info: os.stat_result) -> StatKey:
    return (info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)


def _walk(root: Path, skip: frozenset[str]) -> list[tuple[str, str]]:
    """(relative path, absolute path) of every non-folder entry, as :func:`source_files` sees."""
    found: list[tuple[str, str]] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        base = os.path.relpath(folder, root)
        prefix = "" if base == "." else base.replace(os.sep, "/") + "/"
        for name in sorted(files):
            found.append((prefix + name, os.path.join(folder, name)))
    return found


def source_files(
    root: Path,
    *,
    seen: dict[str, StatKey] | None = None,
    previous: Mapping[str, tuple[int, str]] | None = None,
    trusted: Mapping[str, StatKey] | None = None,
    started_ns: int = 0,
    exclude: tuple[str, ...] | None = None,
) -> dict[str, tuple[int, str]]:
    """Relative path -> (mode, sha256 hex) of every file and symlink under ``root``.

    Symlinks count by their target (mode 0); folders :func:`excluded` names
    (with the goal's ``exclude``) are skipped.
    ``seen`` (if given) receives each regular file's stat row. With ``previous``
    and ``trusted`` (an earlier walk's result and rows), a file whose row is
    unchanged and was older than that walk's ``started_ns`` by more than
    :data:`RACY_NS` keeps its earlier digest instead of being read again.
    """
    entries: dict[str, tuple[int, str]] = {}
    for rel, path in _walk(root, excluded(exclude)):
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            entries[rel] = (0, hashlib.sha256(os.readlink(path).encode()).hexdigest())
            continue
        key = _key(info)
        if seen is not None:
            seen[rel] = key
        mode = stat.S_IMODE(info.st_mode)
        if previous is not None and trusted is not None and trusted.get(rel) == key:
            old = previous.get(rel)
            settled = max(key[1], key[3]) < started_ns - RACY_NS
            if old is not None and old[0] == mode and settled:
                entries[rel] = old
                continue
        with open(path, "rb") as handle:
            entries[rel] = (mode, hashlib.sha256(handle.read()).hexdigest())
    return entries


def digest_entries(entries: Mapping[str, tuple[int, str]]) -> Digest:
    """The source digest of ``entries`` (path -> (mode, sha256 hex))."""
    return digest_of([[rel, mode, sha] for rel, (mode, sha) in sorted(entries.items())])


def source_digest(root: Path, exclude: tuple[str, ...] | None = None) -> tuple[Digest, int]:
    """(digest, file count) of the tree under ``root`` (symlinks by target, no dirs)."""
    entries = source_files(root, exclude=exclude)
    return digest_entries(entries), len(entries)


def stable_digest(root: Path, window_s: float) -> tuple[Digest | None, int]:
    """The source digest of ``root`` if the tree did not move over ``window_s`` seconds.

    The tree is read once; after the window every file is stat'ed again and
    only a file whose (size, mtime, inode, ctime) moved, or that was changed
    too close to the first walk to trust its row (:data:`RACY_NS`), is read
    again. A write in place changes mtime and ctime (ctime cannot be set from
    user space), a replacement changes the inode, so the second walk sees
    every change a second full read would. ``(None, n)`` when the digests differ.
    """
    started_ns = time.time_ns()
    rows: dict[str, StatKey] = {}
    first = source_files(root, seen=rows)
    time.sleep(window_s)
    second = source_files(root, previous=first, trusted=rows, started_ns=started_ns)
    digest = digest_entries(first)
    return (digest if digest_entries(second) == digest else None), len(first)


def copy_source(root: Path, target: Path) -> tuple[Digest, int]:
    """Copy the tree under ``root`` into the new folder ``target``; its source digest.

    Regular files (with their permission bits, not their times) and symlinks
    are copied, folders :func:`excluded` names are not. Each file is hashed from
    the very bytes written into ``target``, so the digest is that of the copy
    (:func:`source_digest` of ``target`` gives the same) without reading it
    back. A symlink to a folder is copied as a link and, as in
    :func:`source_files`, is no part of the digest.
    """
    files: list[tuple[str, str]] = []
    skip = excluded()
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        base = os.path.relpath(folder, root)
        rel_dir = "" if base == "." else base.replace(os.sep, "/") + "/"
        made = target / rel_dir if rel_dir else target
        made.mkdir(parents=True, exist_ok=not rel_dir)
        for name in dirs[:]:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                os.symlink(os.readlink(path), made / name)
                dirs.remove(name)
        files += [(rel_dir + name, os.path.join(folder, name)) for name in sorted(names)]

    def some(items: list[tuple[str, str]]) -> list[tuple[str, tuple[int, str]]]:
        return [(rel, _copy_one(path, target / rel)) for rel, path in items]

    step = max(1, -(-len(files) // _COPY_THREADS))
    slices = [files[i : i + step] for i in range(0, len(files), step)]
    if len(slices) < 2:
        copied = [row for part in slices for row in some(part)]
    else:
        with ThreadPoolExecutor(max_workers=_COPY_THREADS) as pool:
            copied = [row for part in pool.map(some, slices) for row in part]
    entries = dict(copied)
    return digest_entries(entries), len(entries)


def _copy_one(source: str, final: Path) -> tuple[int, str]:
    info = os.lstat(source)
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(source)
        os.symlink(target, final)
        return (0, hashlib.sha256(target.encode()).hexdigest())
    mode = stat.S_IMODE(info.st_mode)
    with open(source, "rb") as handle:
        data = handle.read()
    fd = os.open(final, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return (mode, hashlib.sha256(data).hexdigest())


def protected_digests(root: Path, patterns: tuple[str, ...]) -> dict[str, str]:
    """Path -> ``sha256:`` digest of every file under ``root`` that ``patterns`` guard."""
    found: dict[str, str] = {}
    if not patterns:
        return found
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink() or not protected_by(rel, patterns):
                continue
            found[rel] = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    return found
