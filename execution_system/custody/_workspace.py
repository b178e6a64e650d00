"""Workspace directories: seeding a new one and deleting a retired one."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from contracts import ErrorCode, error
from execution_system.custody._blobs import CHUNK, DIGEST_PREFIX, BlobBatch, BlobStore
from execution_system.custody._durable import Flusher, write_all
from execution_system.custody._restore import verify
from execution_system.custody._tree import CacheRow, Entry, Refusal, Tree, scan, settled
from host._faults import boundary

_HEX = frozenset("0123456789abcdef")

#: Threads writing a seed's files into the new workspace.
_WRITE_THREADS = min(4, os.cpu_count() or 1)

#: Bytes of a seed's new contents kept in memory between staging them and writing the
#: workspace from them (beyond that, the workspace file is written from the staged blob).
_RETAIN_BYTES = 64 << 20


def copy_seed(
    seed: Path, target: Path, blobs: BlobStore, exclude: frozenset[str] = frozenset()
) -> tuple[Tree, dict[str, CacheRow]]:
    """Copy a seed directory into the empty, private folder ``target`` through the blob store.

    The seed is scanned with the same rules as a workspace (so a symlink
    leaving the seed, a device, FIFO, socket or setuid file, or an unsafe name
    is ``CUSTODY_SEED_INVALID``); folders named in ``exclude`` are not copied,
    at any depth. Returns the tree ``target`` was checked to hold, with its
    blobs published durably, and the stat cache of ``target``'s files.

    Order (a crash at any point leaves nothing visible but complete, durable
    content): every new content is staged in ``blobs/.staging`` and every file
    of the tree is written into ``target`` from those same bytes, without a
    flush; then one flush makes all of it durable (one ``syncfs`` per file
    system, an ``fsync`` per file as the fallback); only then are the blobs
    renamed to their names and their folders and ``target``'s flushed. The
    caller renames ``target`` into place and records the savepoint after this
    returns.
    """
    if not seed.is_dir():
        raise error(
            ErrorCode.CUSTODY_SEED_INVALID, "the seed is not a directory", path=os.fspath(seed)
        )
    blobs.staging.mkdir(parents=True, exist_ok=True)
    batch = blobs.batch(retain=_RETAIN_BYTES)
    try:
        # Opened before anything is written: its flush reports every write-back error since.
        with Flusher([blobs.staging, target]) as flusher:
            tree = scan(seed, cache={}, batch=batch, full_verify=True, skip=exclude).tree
            written, folders, rows = _write_tree(target, tree, batch)
            boundary("custody-seed-flush", "before")
            flusher.files(batch.pending() + written)
            boundary("custody-seed-flush", "after")
            batch.commit(flushed=True)
            flusher.dirs(folders)
    except Refusal as refusal:
        raise error(
            ErrorCode.CUSTODY_SEED_INVALID,
            f"{refusal.message} ({refusal.code.value})",
            path=refusal.path,
        ) from None
    except (OSError, ValueError) as exc:
        raise error(
            ErrorCode.CUSTODY_SEED_INVALID,
            f"the seed could not be copied: {getattr(exc, 'strerror', None) or exc}",
            path=os.fspath(seed),
        ) from None
    finally:
        batch.discard()
    now_ns = time.time_ns()
    cache = {path: row for path, row in rows.items() if settled(row, now_ns)}
    # Every content was hashed as it was written; this scan checks the shape (nothing
    # missing, nothing extra, the modes) and re-reads only files too recent to cache.
    differences, observed = verify(target, tree, cache, full_verify=False)
    if differences:
        raise error(
            ErrorCode.CUSTODY_SEED_INVALID,
            "the seed could not be copied exactly: " + "; ".join(differences)[:500],
            path=os.fspath(seed),
        )
    return tree, observed.cache


def _write_tree(
    target: Path, tree: Tree, batch: BlobBatch
) -> tuple[list[Path], set[Path], dict[str, CacheRow]]:
    """Write every entry of ``tree`` into the private folder ``target``, unflushed.

    Contents are read from the staged (or stored) blobs and hashed as they are
    written, so each file holds exactly the bytes its digest names. Returns the
    regular files written, the folders holding them and their stat rows.
    """
    folders: set[Path] = {target}
    files: list[tuple[Path, Entry]] = []
    for entry in sorted(tree.values()):
        final = target / entry.path
        if final.parent not in folders:
            final.parent.mkdir(parents=True, exist_ok=True)
            folders.update(final.parents[: len(Path(entry.path).parents) - 1])
        if not entry.link:
            files.append((final, entry))
            continue
        raw = batch.source(entry.sha256).read_bytes()
        if DIGEST_PREFIX + hashlib.sha256(raw).hexdigest() != entry.sha256:
            raise ValueError(f"the staged symlink target of {entry.path} is corrupt")
        os.symlink(raw.decode("utf-8"), final)

    def one(final: Path, entry: Entry) -> CacheRow:
        data = batch.kept(entry.sha256)
        if data is not None:
            return _write_bytes(final, entry, data)
        return _write_file(final, entry, batch.source(entry.sha256))

    def some(items: list[tuple[Path, Entry]]) -> list[tuple[str, CacheRow]]:
        return [(e.path, one(f, e)) for f, e in items]

    if len(files) < 64:
        written = some(files)
    else:
        # File creation is system time, which releases the GIL; one slice per thread.
        step = -(-len(files) // _WRITE_THREADS)
        slices = [files[i : i + step] for i in range(0, len(files), step)]
        with ThreadPoolExecutor(max_workers=_WRITE_THREADS) as pool:
            written = [row for part in pool.map(some, slices) for row in part]
    return [final for final, _ in files], folders, dict(written)


def _write_bytes(final: Path, entry: Entry, data: bytes) -> CacheRow:
    """Write a content the scan kept in memory (the very bytes it hashed and staged)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(final, flags, 0o600)
    try:
        write_all(fd, data)
        os.fchmod(fd, entry.mode)
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if st.st_size != entry.size:
        raise ValueError(f"the content of {entry.path} was not written whole")
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, entry.sha256)


def _write_file(final: Path, entry: Entry, source: Path) -> CacheRow:
    sha = hashlib.sha256()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    with source.open("rb") as handle:
        fd = os.open(final, flags, 0o600)
        try:
            while chunk := handle.read(CHUNK):
                sha.update(chunk)
                write_all(fd, chunk)
            os.fchmod(fd, entry.mode)
            st = os.fstat(fd)
        finally:
            os.close(fd)
    if DIGEST_PREFIX + sha.hexdigest() != entry.sha256 or st.st_size != entry.size:
        raise ValueError(f"the staged content of {entry.path} is corrupt")
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, entry.sha256)


def drop_leftover_openings(folder: Path, delivery: str) -> None:
    """Delete the staging folders of earlier opens of ``delivery`` that were killed midway.

    Names are matched exactly (``.open-<delivery>-<12 hex>``): delivery ``d`` must
    not take the folder of ``d-x``, which another process may be filling.
    """
    prefix = f".open-{delivery}-"
    with os.scandir(folder) as listing:
        names = [entry.name for entry in listing if entry.name.startswith(prefix)]
    for name in names:
        suffix = name[len(prefix) :]
        if len(suffix) == 12 and _HEX.issuperset(suffix):
            remove_tree(folder / name)


def remove_tree(path: Path) -> None:
    """Delete a workspace (or whatever stands at its path), even parts made unwritable."""

    def retry(func: Callable[..., Any], name: str, _exc: object) -> None:
        # Without write+exec on the parent the entry cannot be unlinked.
        os.chmod(os.path.dirname(name), stat.S_IRWXU)
        func(name)

    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, onerror=retry)
