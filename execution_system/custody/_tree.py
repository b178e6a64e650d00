"""Workspace trees: path rules, scanning, manifests and their digests.

A tree is the set of regular files and symlinks under a workspace, each with
its relative POSIX path, permission bits, size and SHA-256. Directories are
implicit (an empty directory is not part of a tree). A savepoint id is the
digest of the canonical JSON manifest of a tree, so equal trees have equal ids
in every delivery.

Scanning is where custody refuses what it cannot represent safely: a symlink
that leaves the workspace, a device, FIFO, socket or setuid/setgid file, or a
name that is not UTF-8 or contains control characters.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import operator
import os
import posixpath
import stat
import time
from collections.abc import Mapping, Set
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from contracts import Digest, ErrorCode, FileEntry, SavepointId, digest_bytes
from execution_system.custody._blobs import CHUNK, DIGEST_PREFIX, BlobBatch

#: Version tag inside every manifest; part of the savepoint digest.
MANIFEST_FORMAT = "execution-system/custody-manifest/v1"

#: Files up to this size are hashed from one in-memory read, which is then
#: stored directly if the blob is new (one read instead of two).
_SMALL = 4 << 20

#: "Racily clean" guard (the problem git's index has): a file whose ctime or
#: mtime is this close to the scan's start could be rewritten within the same
#: timestamp tick without its stat changing, so its digest is not cached.
#: 50 ms is well above the coarse kernel clock tick (1-10 ms).
_RACY_NS = 50_000_000

#: Threads hashing cache misses: reads and hashlib release the GIL.
_HASH_THREADS = min(4, os.cpu_count() or 1)

_SETID = stat.S_ISUID | stat.S_ISGID

_name_of = operator.attrgetter("name")

#: How a folder is opened to be listed (and its entries stat'ed relative to it).
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC

_CONTROL = frozenset(chr(c) for c in [*range(0x20), 0x7F])

#: Folder names custody leaves out of seeds, snapshots, digests and restores, at
#: any depth: version control, virtual environments and caches (machine-specific,
#: rebuilt, often large, and a venv's absolute interpreter symlinks could not be
#: represented anyway).
DEFAULT_EXCLUDED: frozenset[str] = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".eggs",
        "node_modules",
    }
)


class Entry(NamedTuple):
    """One file or symlink of a tree (the internal, allocation-light twin of ``FileEntry``)."""

    path: str
    """Relative POSIX path."""
    mode: int
    """Permission bits; 0 for symlinks."""
    size: int
    """Content size (symlinks: target length in bytes)."""
    sha256: str
    """``sha256:<hex>`` of the content (symlinks: of the target)."""
    link: bool
    """Whether the entry is a symlink."""

    def to_file_entry(self) -> FileEntry:
        """The public record."""
        return FileEntry(
            path=self.path,
            mode=self.mode,
            size=self.size,
            sha256=Digest(self.sha256),
            link=self.link,
        )


Tree = dict[str, Entry]

#: What the stat cache remembers per path: size, mtime_ns, inode, ctime_ns, digest.
CacheRow = tuple[int, int, int, int, str]


class Refusal(Exception):
    """Custody refuses a tree, a path or a capability (becomes a refused verdict)."""

    def __init__(self, code: ErrorCode, path: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        """Why."""
        self.path = path
        """Which path or claim."""
        self.message = message
        """One sentence."""


def printable(text: str) -> str:
    """``text`` with control characters and undecodable bytes escaped, for messages."""
    return repr(text)[1:-1]


def check_name(name: str, where: str) -> None:
    """Refuse a name that is not UTF-8 or holds control characters."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise Refusal(
            ErrorCode.CUSTODY_PATH_TRAVERSAL, printable(where), "name is not valid UTF-8"
        ) from None
    if not _CONTROL.isdisjoint(name):
        raise Refusal(
            ErrorCode.CUSTODY_PATH_TRAVERSAL,
            printable(where),
            "name contains a control character",
        )


def check_relative_path(path: str) -> str:
    """Return ``path`` if it is a canonical relative POSIX path inside a workspace.

    Refused (``CUSTODY_PATH_TRAVERSAL``): empty, absolute, any ``..``, ``.`` or
    empty component, non-UTF-8 or control characters.
    """
    if not path:
        raise Refusal(ErrorCode.CUSTODY_PATH_TRAVERSAL, "", "path is empty")
    check_name(path, path)
    if path.startswith("/"):
        raise Refusal(ErrorCode.CUSTODY_PATH_TRAVERSAL, printable(path), "path is absolute")
    if any(part in ("", ".", "..") for part in path.split("/")):
        raise Refusal(
            ErrorCode.CUSTODY_PATH_TRAVERSAL,
            printable(path),
            "path has a '..', '.' or empty component",
        )
    return path


def within(path: str, prefixes: tuple[str, ...]) -> bool:
    """Whether ``path`` is one of ``prefixes`` or below one (empty ``prefixes``: anywhere)."""
    if not prefixes:
        return True
    return any(path == prefix or path.startswith(prefix + "/") for prefix in prefixes)


_GLOB = frozenset("*?[")


def _match_parts(parts: list[str], pattern: list[str]) -> bool:
    """Whether ``parts`` start with components matching ``pattern`` (``**``: any run)."""
    if not pattern:
        return True  # the pattern named a folder: everything below it matches
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_match_parts(parts[i:], rest) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], head) and _match_parts(parts[1:], rest)


def protected_by(path: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``path`` is guarded by one of ``patterns``.

    A pattern without glob characters is a prefix, as in :func:`within`
    (``tests`` guards ``tests`` and everything below it). A pattern with
    ``*``, ``?`` or ``[`` is matched per path component with
    :func:`fnmatch.fnmatchcase`, ``**`` standing for any number of components
    (``**/conftest.py`` guards a ``conftest.py`` in every folder); a match on
    a folder guards everything below it, like a prefix.
    """
    parts = path.split("/")
    for pattern in patterns:
        if _GLOB.isdisjoint(pattern):
            if path == pattern or path.startswith(pattern + "/"):
                return True
        elif _match_parts(parts, pattern.split("/")):
            return True
    return False


def _describe(fmt: int) -> str:
    names = {
        stat.S_IFIFO: "a FIFO",
        stat.S_IFSOCK: "a socket",
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
    }
    return names.get(fmt, "not a regular file, directory or symlink")


def check_link(root_real: str, abs_path: str, rel: str, target: str) -> None:
    """Refuse a symlink whose target is absolute or resolves outside the workspace.

    Both the lexical resolution and the real one (following the symlinks the
    tree actually holds) must stay inside: a chain such as ``a -> .`` plus
    ``b -> a/..`` is lexically inside but really leaves the root.
    """
    check_name(target, rel)
    if target.startswith("/"):
        raise Refusal(ErrorCode.CUSTODY_SYMLINK_ESCAPE, rel, "symlink target is absolute")
    lexical = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    real = os.path.realpath(abs_path)
    if (
        lexical == ".."
        or lexical.startswith("../")
        or (real != root_real and not real.startswith(root_real + os.sep))
    ):
        raise Refusal(
            ErrorCode.CUSTODY_SYMLINK_ESCAPE,
            rel,
            f"symlink target {printable(target)!r} resolves outside the workspace",
        )


@dataclass
class Scan:
    """A tree observed on disk and what it cost to observe."""

    tree: Tree
    """The entries by path."""
    cache: dict[str, CacheRow]
    """The stat cache to keep for the next scan."""
    hashed_files: int = 0
    """Files whose content was read (cache misses, or all under ``full_verify``)."""
    hashed_bytes: int = 0
    """Bytes read to hash them."""
    errors: list[Refusal] = field(default_factory=list)
    """Refusals (lenient scans only; strict scans raise the first)."""


def cache_key(st: os.stat_result) -> tuple[int, int, int, int]:
    """The part of a stat result the stat cache compares."""
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def settled(row: CacheRow, now_ns: int) -> bool:
    """Whether a stat row is old enough to be cached (not "racily clean" at ``now_ns``)."""
    return row[3] < now_ns - _RACY_NS and row[1] < now_ns - _RACY_NS


def _hash_file(
    rel: str, abs_path: str, batch: BlobBatch | None, now_ns: int
) -> tuple[Entry, CacheRow | None]:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(abs_path, flags)
    except OSError as exc:
        # Replaced by a symlink or removed between listing and opening.
        raise Refusal(ErrorCode.CUSTODY_REJECTED, rel, f"changed while scanned: {exc}") from None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refusal(ErrorCode.CUSTODY_SPECIAL_FILE, rel, _describe(stat.S_IFMT(st.st_mode)))
        if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
            raise Refusal(ErrorCode.CUSTODY_SPECIAL_FILE, rel, "setuid/setgid file")
        if st.st_size <= _SMALL:
            data = handle.read()
            digest = DIGEST_PREFIX + hashlib.sha256(data).hexdigest()
            size = len(data)
            if batch is not None and batch.wanted(digest):
                batch.add_bytes(digest, data)
        else:
            sha = hashlib.sha256()
            size = 0
            while chunk := handle.read(CHUNK):
                sha.update(chunk)
                size += len(chunk)
            digest = DIGEST_PREFIX + sha.hexdigest()
            if batch is not None and batch.wanted(digest):
                handle.seek(0)
                copied, _ = batch.add_stream(handle)
                if copied != digest:
                    raise Refusal(
                        ErrorCode.CUSTODY_REJECTED, rel, "file changed while it was scanned"
                    )
    entry = Entry(rel, st.st_mode & 0o7777, size, digest, False)
    settled = st.st_ctime_ns < now_ns - _RACY_NS and st.st_mtime_ns < now_ns - _RACY_NS
    row = (*cache_key(st), digest) if settled and size == st.st_size else None
    return entry, row


def hash_path(abs_path: str) -> str | None:
    """The digest of the regular file at ``abs_path``, or None if it is not one."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(abs_path, flags)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        sha = hashlib.sha256()
        while chunk := handle.read(CHUNK):
            sha.update(chunk)
    return DIGEST_PREFIX + sha.hexdigest()


def _link_entry(
    root_real: str, abs_path: str, rel: str, batch: BlobBatch | None
) -> tuple[Entry, bytes]:
    target = os.readlink(abs_path)
    check_link(root_real, abs_path, rel, target)
    raw = target.encode("utf-8")
    digest = digest_bytes(raw)
    if batch is not None and batch.wanted(digest):
        batch.add_bytes(digest, raw)
    return Entry(rel, 0, len(raw), digest, True), raw


def scan(
    root: Path,
    *,
    cache: Mapping[str, CacheRow],
    batch: BlobBatch | None = None,
    full_verify: bool = False,
    strict: bool = True,
    stored: Set[str] = frozenset(),
    skip: Set[str] = frozenset(),
) -> Scan:
    """Observe the tree under ``root``.

    A regular file whose (size, mtime_ns, inode, ctime_ns) matches ``cache``
    is not read again unless ``full_verify``. With ``batch``, every content not
    yet stored is staged into it. ``strict`` raises the first :class:`Refusal`;
    otherwise refusals are collected in ``errors`` and the entry is left out.
    ``stored`` names digests known to be in the blob store (those of a
    recorded manifest: never collected while the delivery lives), which spares
    a cache hit the existence check. Folders (and symlinks) named in ``skip``
    are left out wherever they are: a delivery's exclusions (``.git/``, venvs,
    caches), which are then in no tree and no digest.
    """
    now_ns = time.time_ns()
    root_real = ""  # resolved at the first link: only a link's target is checked against it
    result = Scan(tree={}, cache={})
    tree, kept = result.tree, result.cache
    pending: list[tuple[str, str]] = []
    stack = [("", os.fspath(root))]
    while stack:
        rel_dir, abs_dir = stack.pop()
        dir_fd = -1
        try:
            # Listed through a descriptor, each entry's lstat is an fstatat of one name
            # instead of a walk down the whole path: a quarter less time per validate.
            dir_fd = os.open(abs_dir, _DIR_FLAGS | (os.O_NOFOLLOW if rel_dir else 0))
            with os.scandir(dir_fd) as listing:
                children = sorted(listing, key=_name_of)
        except OSError as exc:
            if dir_fd >= 0:
                os.close(dir_fd)
            refusal = Refusal(
                ErrorCode.CUSTODY_REJECTED,
                printable(rel_dir or "."),
                f"cannot list the directory: {exc.strerror}",
            )
            if strict:
                raise refusal from None
            result.errors.append(refusal)
            continue
        try:
            for child in children:
                name = child.name
                rel = f"{rel_dir}/{name}" if rel_dir else name
                try:
                    # Every printable name is valid UTF-8 without control characters: the
                    # full check only runs for the rare other ones (and refuses them).
                    if not name.isprintable():
                        check_name(name, rel)
                    st = child.stat(follow_symlinks=False)
                    mode = st.st_mode
                    fmt = stat.S_IFMT(mode)
                    if fmt == stat.S_IFREG and not mode & _SETID:
                        # The hot path of every validate: a file the stat cache knows.
                        row = cache.get(rel)
                        if (
                            not full_verify
                            and row is not None
                            and row[0] == st.st_size
                            and row[1] == st.st_mtime_ns
                            and row[2] == st.st_ino
                            and row[3] == st.st_ctime_ns
                            # A cached digest is only reusable if its blob is still stored.
                            and (batch is None or row[4] in stored or not batch.wanted(row[4]))
                        ):
                            tree[rel] = Entry(rel, mode & 0o7777, row[0], row[4], False)
                            kept[rel] = row
                        else:
                            pending.append((rel, f"{abs_dir}/{name}"))
                    elif fmt == stat.S_IFDIR:
                        if name not in skip:
                            stack.append((rel, f"{abs_dir}/{name}"))
                    elif fmt == stat.S_IFLNK:
                        if name not in skip:
                            root_real = root_real or os.path.realpath(root)
                            tree[rel] = _link_entry(root_real, f"{abs_dir}/{name}", rel, batch)[0]
                    elif fmt != stat.S_IFREG:
                        raise Refusal(ErrorCode.CUSTODY_SPECIAL_FILE, rel, _describe(fmt))
                    else:
                        raise Refusal(ErrorCode.CUSTODY_SPECIAL_FILE, rel, "setuid/setgid file")
                except Refusal as refusal:
                    if strict:
                        raise
                    result.errors.append(refusal)
        finally:
            os.close(dir_fd)
    _hash_pending(result, pending, batch, now_ns, strict=strict)
    return result


def _hash_pending(
    result: Scan,
    pending: list[tuple[str, str]],
    batch: BlobBatch | None,
    now_ns: int,
    *,
    strict: bool,
) -> None:
    def one(item: tuple[str, str]) -> tuple[Entry, CacheRow | None] | Refusal:
        try:
            return _hash_file(item[0], item[1], batch, now_ns)
        except Refusal as refusal:
            return refusal

    def some(items: list[tuple[str, str]]) -> list[tuple[Entry, CacheRow | None] | Refusal]:
        return [one(item) for item in items]

    if len(pending) < 64:
        outcomes = some(pending)
    else:
        # One contiguous slice per thread: per-file futures cost more than small files do.
        step = -(-len(pending) // _HASH_THREADS)
        slices = [pending[i : i + step] for i in range(0, len(pending), step)]
        with ThreadPoolExecutor(max_workers=_HASH_THREADS) as pool:
            outcomes = [outcome for part in pool.map(some, slices) for outcome in part]
    for outcome in outcomes:
        if isinstance(outcome, Refusal):
            if strict:
                raise outcome
            result.errors.append(outcome)
            continue
        entry, row = outcome
        result.tree[entry.path] = entry
        result.hashed_files += 1
        result.hashed_bytes += entry.size
        if row is not None:
            result.cache[entry.path] = row


def encode_manifest(tree: Mapping[str, Entry]) -> bytes:
    """The canonical (RFC 8785) JSON manifest of ``tree``, entries sorted by path.

    Encoded with ``json.dumps`` rather than the general RFC 8785 encoder,
    which is ~5x slower on a 10,000-entry manifest. For this document the two
    agree byte for byte: keys are ASCII (so code-point and UTF-16 order are
    the same), numbers are integers, and paths and digests hold no control
    characters or lone surrogates (scanning refuses such names), so no string
    needs an escape on which the encoders differ. A test recomputes savepoint ids
    with ``contracts.digest_of``.
    """
    entries = [
        {"link": e.link, "mode": e.mode, "path": e.path, "sha256": e.sha256, "size": e.size}
        for e in sorted(tree.values(), key=lambda e: e.path)
    ]
    document = {"entries": entries, "format": MANIFEST_FORMAT}
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def savepoint_of(manifest: bytes) -> SavepointId:
    """The savepoint id of a manifest: its digest."""
    return SavepointId(digest_bytes(manifest))


def decode_manifest(data: bytes, savepoint: str | None) -> Tree:
    """Parse a stored manifest, refusing one whose digest is not ``savepoint``.

    ``savepoint=None`` skips the digest check (reference counting only needs
    the blob digests, and re-hashing every manifest would dominate its cost).
    """
    if savepoint is not None and savepoint_of(data) != savepoint:
        raise ValueError("manifest digest does not match its savepoint id")
    document = json.loads(data)
    if not isinstance(document, dict) or document.get("format") != MANIFEST_FORMAT:
        raise ValueError("not a custody manifest")
    tree: Tree = {}
    for raw in document["entries"]:
        entry = Entry(raw["path"], raw["mode"], raw["size"], raw["sha256"], raw["link"])
        types_ok = (
            isinstance(entry.path, str)
            and type(entry.mode) is int
            and type(entry.size) is int
            and type(entry.link) is bool
            and isinstance(entry.sha256, str)
        )
        try:
            fresh = types_ok and check_relative_path(entry.path) not in tree
        except Refusal:
            fresh = False
        if not fresh:
            raise ValueError(f"malformed manifest entry {printable(str(raw))}")
        tree[entry.path] = entry
    return tree


def diff(old: Mapping[str, Entry], new: Mapping[str, Entry]) -> list[str]:
    """Paths added, removed or changed (content, mode, kind) from ``old`` to ``new``, sorted."""
    if old == new:  # the common case, compared in C
        return []
    return sorted(path for path in old.keys() | new.keys() if old.get(path) != new.get(path))


def tree_bytes(tree: Mapping[str, Entry]) -> int:
    """Total content size of a tree."""
    return sum(entry.size for entry in tree.values())
