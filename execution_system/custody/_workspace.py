"""Workspace directories: seeding a new one and deleting a retired one."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contracts import ErrorCode, error
from execution_system.custody._blobs import BlobStore
from execution_system.custody._restore import materialize, verify
from execution_system.custody._tree import Refusal, Tree, scan


def copy_seed(
    seed: Path, target: Path, blobs: BlobStore, exclude: frozenset[str] = frozenset()
) -> Tree:
    """Copy a seed directory into the empty ``target`` through the blob store.

    The seed is scanned with the same rules as a workspace (so a symlink
    leaving the seed, a device, FIFO, socket or setuid file, or an unsafe name
    is ``CUSTODY_SEED_INVALID``), its contents are stored as blobs, and the
    tree is materialized and verified like a restore. Folders named in
    ``exclude`` are not copied, at any depth. Returns the tree ``target`` was
    verified to hold (its blobs are durable).
    """
    if not seed.is_dir():
        raise error(
            ErrorCode.CUSTODY_SEED_INVALID, "the seed is not a directory", path=os.fspath(seed)
        )
    batch = blobs.batch()
    try:
        tree = scan(seed, cache={}, batch=batch, full_verify=True, skip=exclude).tree
        batch.commit()
    except Refusal as refusal:
        raise error(
            ErrorCode.CUSTODY_SEED_INVALID,
            f"{refusal.message} ({refusal.code.value})",
            path=refusal.path,
        ) from None
    finally:
        batch.discard()
    problems = materialize(target, tree, blobs, {})
    differences, _ = verify(target, tree, {}, full_verify=True)
    if problems or differences:
        raise error(
            ErrorCode.CUSTODY_SEED_INVALID,
            "the seed could not be copied exactly: " + "; ".join(problems + differences)[:500],
            path=os.fspath(seed),
        )
    return tree


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
