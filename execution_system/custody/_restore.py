"""Materializing a savepoint: make the workspace exactly a stored tree, then check it.

Restore never trusts its own writes: after materializing, the caller re-scans
the workspace and compares it with the manifest (:func:`verify`). Only a
confirmed match may move the head; anything else is "restore uncertain".
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Mapping, Set
from pathlib import Path

from contracts import ErrorCode, digest_bytes, error
from execution_system.custody._blobs import CHUNK, DIGEST_PREFIX, BlobStore
from execution_system.custody._durable import Flusher, temp_name, write_all
from execution_system.custody._tree import (
    CacheRow,
    Entry,
    Scan,
    Tree,
    cache_key,
    diff,
    hash_path,
    printable,
    scan,
)


def _parents(tree: Mapping[str, Entry]) -> set[str]:
    dirs: set[str] = set()
    for path in tree:
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:depth]))
    return dirs


def _matches(abs_path: str, st: os.stat_result, want: Entry, cache: Mapping[str, CacheRow]) -> bool:
    if want.link:
        if not stat.S_ISLNK(st.st_mode):
            return False
        target = os.readlink(abs_path).encode("utf-8", "surrogateescape")
        return digest_bytes(target) == want.sha256
    if not stat.S_ISREG(st.st_mode) or st.st_size != want.size:
        return False
    if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
        return False
    row = cache.get(want.path)
    if row is not None and row[:4] == cache_key(st):
        return row[4] == want.sha256
    return hash_path(abs_path) == want.sha256


def _prune(
    root: Path,
    want: Mapping[str, Entry],
    cache: Mapping[str, CacheRow],
    problems: list[str],
    skip: Set[str],
) -> set[str]:
    """Remove everything ``want`` does not hold; return the paths already correct.

    Folders and symlinks named in ``skip`` are not part of any tree and are left alone.
    """
    want_dirs = _parents(want)
    keep: set[str] = set()
    stack = [("", os.fspath(root))]
    while stack:
        rel_dir, abs_dir = stack.pop()
        with os.scandir(abs_dir) as listing:
            children = list(listing)
        for child in children:
            rel = f"{rel_dir}/{child.name}" if rel_dir else child.name
            try:
                st = child.stat(follow_symlinks=False)
                if child.name in skip and (stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                    continue
                if stat.S_ISDIR(st.st_mode):
                    if rel in want_dirs:
                        # Directory modes are not part of a tree, but an executor may have
                        # made one unreadable; restore needs to enter it.
                        if st.st_mode & 0o700 != 0o700:
                            os.chmod(child.path, (st.st_mode & 0o7777) | 0o700)
                        stack.append((rel, child.path))
                    else:
                        shutil.rmtree(child.path)
                    continue
                wanted = want.get(rel)
                if wanted is not None and _matches(child.path, st, wanted, cache):
                    keep.add(rel)
                    if not wanted.link and st.st_mode & 0o7777 != wanted.mode:
                        os.chmod(child.path, wanted.mode)
                    continue
                os.unlink(child.path)
            except OSError as exc:
                problems.append(f"{printable(rel)}: cannot remove or fix: {exc.strerror}")
    return keep


def _makedirs(root: Path, rel_dir: str, touched: set[Path]) -> None:
    current = root
    for part in rel_dir.split("/") if rel_dir else []:
        current = current / part
        if not current.is_dir():
            current.mkdir()
            touched.add(current.parent)


def _stage(final: Path, entry: Entry, blobs: BlobStore) -> Path:
    """Write ``entry``'s content next to ``final``; raise ValueError if the blob is corrupt."""
    tmp = temp_name(final)
    with blobs.open(entry.sha256) as source:
        if entry.link:
            raw = source.read()
            if digest_bytes(raw) != entry.sha256:
                raise ValueError("stored symlink target is corrupt")
            os.symlink(raw.decode("utf-8"), tmp)
            return tmp
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        sha = hashlib.sha256()
        try:
            while chunk := source.read(CHUNK):
                sha.update(chunk)
                write_all(fd, chunk)
            os.fchmod(fd, entry.mode)
        finally:
            os.close(fd)
    if DIGEST_PREFIX + sha.hexdigest() != entry.sha256:
        tmp.unlink()
        raise ValueError("stored content is corrupt")
    return tmp


def materialize(
    root: Path,
    want: Mapping[str, Entry],
    blobs: BlobStore,
    cache: Mapping[str, CacheRow],
    skip: Set[str] = frozenset(),
) -> list[str]:
    """Make the tree under ``root`` exactly ``want``; return what could not be done.

    Extra files, symlinks, special files and directories (including empty
    ones) are removed; missing or different entries are written from the blob
    store (staged beside their target, flushed together, then renamed into place);
    modes are reset. Untouched files are recognized by the stat cache. Folders
    named in ``skip`` (the delivery's exclusions) are left as they are.
    """
    with Flusher([root]) as flusher:
        return _materialize(root, want, blobs, cache, skip, flusher)


def _materialize(
    root: Path,
    want: Mapping[str, Entry],
    blobs: BlobStore,
    cache: Mapping[str, CacheRow],
    skip: Set[str],
    flusher: Flusher,
) -> list[str]:
    problems: list[str] = []
    keep = _prune(root, want, cache, problems, skip)
    staged: list[tuple[Path, Path, bool]] = []
    touched: set[Path] = set()
    for entry in sorted(want.values()):
        if entry.path in keep:
            continue
        final = root / entry.path
        try:
            _makedirs(root, entry.path.rpartition("/")[0], touched)
            staged.append((_stage(final, entry, blobs), final, entry.link))
        except FileNotFoundError:
            problems.append(f"{entry.path}: content blob is missing from the store")
        except (OSError, ValueError) as exc:
            problems.append(f"{entry.path}: {getattr(exc, 'strerror', None) or exc}")
    # A symlink has nothing to flush; its directory entry is flushed below.
    flusher.files([tmp for tmp, _, link in staged if not link])
    for tmp, final, _ in staged:
        try:
            os.replace(tmp, final)
        except OSError as exc:
            problems.append(f"{printable(os.fspath(final))}: {exc.strerror}")
            tmp.unlink(missing_ok=True)
        touched.add(final.parent)
    flusher.dirs(touched)
    return problems


def verify(
    root: Path,
    want: Tree,
    cache: Mapping[str, CacheRow],
    *,
    full_verify: bool,
    skip: Set[str] = frozenset(),
) -> tuple[list[str], Scan]:
    """Re-scan ``root`` and list every way it differs from ``want`` (empty: confirmed).

    Files written by :func:`materialize` have new inodes, so they are always
    re-read; ``full_verify`` re-reads the rest too.
    """
    observed = scan(root, cache=cache, full_verify=full_verify, strict=False, skip=skip)
    differences = [f"{refusal.path}: {refusal.message}" for refusal in observed.errors]
    differences += [f"{path}: differs from the savepoint" for path in diff(want, observed.tree)]
    return differences, observed


def write_exactly(target: Path, tree: Tree, blobs: BlobStore, savepoint: str) -> None:
    """Write ``tree`` into the (empty) folder ``target`` and verify every byte.

    Raises ``CUSTODY_RESTORE_UNCERTAIN`` if the result is not exactly ``tree``.
    """
    target.mkdir(parents=True, exist_ok=True)
    problems = materialize(target, tree, blobs, {})
    differences, _ = verify(target, tree, {}, full_verify=True)
    if problems or differences:
        raise error(
            ErrorCode.CUSTODY_RESTORE_UNCERTAIN,
            "the savepoint could not be written exactly: "
            + "; ".join(problems + differences)[:500],
            path=savepoint,
        )
