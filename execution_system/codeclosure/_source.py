"""The candidate's source identity: one digest over every file's path, mode and content.

Used by the runtime's freeze and check agents, so the digest a check binds its
evidence to is computed exactly as the digest the freeze recorded.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from contracts import Digest, digest_of
from execution_system.custody import DEFAULT_EXCLUDED, protected_by

#: Folders that are never part of a candidate's identity, at any depth: the
#: same set custody leaves out of a seed (version control, venvs, caches).
EXCLUDED: frozenset[str] = DEFAULT_EXCLUDED


def source_files(root: Path) -> dict[str, tuple[int, str]]:
    """Relative path -> (mode, sha256 hex) of every file and symlink under ``root``.

    Symlinks count by their target (mode 0); folders in :data:`EXCLUDED` are skipped.
    """
    entries: dict[str, tuple[int, str]] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in EXCLUDED)
        for name in sorted(files):
            path = Path(folder) / name
            info = path.lstat()
            rel = path.relative_to(root).as_posix()
            if stat.S_ISLNK(info.st_mode):
                content = os.readlink(path).encode()
                mode = 0
            else:
                content = path.read_bytes()
                mode = stat.S_IMODE(info.st_mode)
            entries[rel] = (mode, hashlib.sha256(content).hexdigest())
    return entries


def source_digest(root: Path) -> tuple[Digest, int]:
    """(digest, file count) of the tree under ``root`` (symlinks by target, no dirs)."""
    entries = source_files(root)
    return digest_of([[rel, mode, sha] for rel, (mode, sha) in sorted(entries.items())]), len(
        entries
    )


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
