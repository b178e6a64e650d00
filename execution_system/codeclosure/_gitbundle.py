"""``goal export --format bundle``: the accepted change as a git commit in a bundle.

The commit's tree is exactly the accepted tree (every file custody froze, with
its bytes and executable bit; symlinks as links). Its parent is the project's
``HEAD`` when the project is a git repository whose ``HEAD`` tree is exactly the
goal's base; the bundle then holds only the new commit and names ``HEAD`` as
its prerequisite, so ``git fetch BUNDLE`` in that repository brings the change
in as one commit on top of what the goal started from. Otherwise (no repository,
a dirty or moved checkout) the bundle is self-contained: a root commit holding
the base, and the accepted commit on top of it.

Blobs are written with ``--no-filters`` and trees with ``update-index``, so a
project's ``.gitattributes`` or ignore rules cannot alter what the commit holds.
Author and committer are ``execsys`` at the goal's closing time: exporting the
same goal twice gives the same commit ids.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from contracts import ErrorCode, error
from execution_system.codeclosure._source import EXCLUDED

_IDENTITY = {"GIT_AUTHOR_NAME": "execsys", "GIT_AUTHOR_EMAIL": "execsys@localhost"}


def write_bundle(
    base: Path, after: Path, facts: dict[str, Any], project: Path, output: Path
) -> dict[str, Any]:
    """Write the bundle to ``output``; its ref, commit, parent and prerequisite."""
    with tempfile.TemporaryDirectory(prefix="execsys-bundle-") as scratch:
        repo = _Repo(Path(scratch) / "repo.git", facts["closed"])
        head = _project_head(project)
        if head is not None:
            repo.borrow_objects(head[2])
        base_tree = repo.tree(base)
        if head is not None and head[1] == base_tree:
            parent, prerequisite = head[0], True
        else:
            parent = repo.commit(base_tree, None, f"execsys goal {facts['goal']}: base\n")
            prerequisite = False
        message = (
            f"execsys goal {facts['goal']}: accepted change\n\n"
            f"Execsys-Base: {facts['base']}\n"
            f"Execsys-Accepted: {facts['frozen']}\n"
            f"Execsys-Manifest: {facts['manifest']}\n"
        )
        commit = repo.commit(repo.tree(after), parent, message)
        ref = f"refs/heads/execsys/{facts['goal']}"
        repo.git("update-ref", ref, commit)
        span = [ref, f"^{parent}"] if prerequisite else [ref]
        written = Path(scratch) / "goal.bundle"
        repo.git("bundle", "create", "-q", os.fspath(written), *span)
        repo.git("bundle", "verify", "-q", os.fspath(written))
        # Only a verified bundle reaches the output, whole (rename within its folder).
        output.parent.mkdir(parents=True, exist_ok=True)
        partial = output.with_name(f".{output.name}.partial")
        shutil.copyfile(written, partial)
        os.replace(partial, output)
    return {"ref": ref, "commit": commit, "parent": parent, "prerequisite": prerequisite}


def _project_head(project: Path) -> tuple[str, str, str] | None:
    """(HEAD commit, its tree, objects folder) when ``project`` is a git work tree."""
    try:
        found = subprocess.run(
            [
                "git",
                "-C",
                os.fspath(project),
                "rev-parse",
                "HEAD",
                "HEAD^{tree}",
                "--path-format=absolute",
                "--git-path",
                "objects",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = found.stdout.split()
    if found.returncode != 0 or len(lines) != 3:
        return None
    return lines[0], lines[1], lines[2]


class _Repo:
    """A scratch bare repository the commits are built in."""

    def __init__(self, path: Path, when: str) -> None:
        self.path = path
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
            **_IDENTITY,
            "GIT_COMMITTER_NAME": _IDENTITY["GIT_AUTHOR_NAME"],
            "GIT_COMMITTER_EMAIL": _IDENTITY["GIT_AUTHOR_EMAIL"],
            "GIT_AUTHOR_DATE": when,
            "GIT_COMMITTER_DATE": when,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
        }
        self.git("init", "-q", "--bare", os.fspath(path), bare=False)

    def git(self, *args: str, stdin: str | None = None, bare: bool = True) -> str:
        argv = ["git", *(["--git-dir", os.fspath(self.path)] if bare else []), *args]
        try:
            done = subprocess.run(
                argv,
                input=stdin,
                capture_output=True,
                text=True,
                env=self.env,
                check=False,
                timeout=600,
            )
        except FileNotFoundError:
            raise error(
                ErrorCode.GOAL_INVALID,
                "git is not installed; a bundle needs it",
                path="git",
                expected="--format patch, or git on PATH",
            ) from None
        if done.returncode != 0:
            raise error(
                ErrorCode.GOAL_EXPORT_FAILED,
                f"git {args[0]} failed: {done.stderr.strip()[:300]}",
                path=args[0],
            )
        return done.stdout.strip()

    def borrow_objects(self, objects: str) -> None:
        """Read (never write) the project's objects, so its HEAD can be the parent."""
        alternates = self.path / "objects" / "info" / "alternates"
        alternates.write_text(objects + "\n", encoding="utf-8")

    def tree(self, root: Path) -> str:
        """Write ``root``'s files as blobs and return the tree id."""
        files, links = _walk(root)
        rows: list[str] = []
        if files:
            ids = self.git(
                "hash-object",
                "-w",
                "--no-filters",
                "--stdin-paths",
                stdin="".join(os.fspath(root / rel) + "\n" for rel, _ in files),
            ).split()
            rows += [f"{mode} {sha}\t{rel}" for (rel, mode), sha in zip(files, ids, strict=True)]
        for rel, target in links:
            sha = self.git("hash-object", "-w", "--stdin", stdin=target)
            rows.append(f"120000 {sha}\t{rel}")
        index = self.path / "index"
        index.unlink(missing_ok=True)
        self.env["GIT_INDEX_FILE"] = os.fspath(index)
        try:
            self.git("update-index", "--add", "--index-info", stdin="".join(r + "\n" for r in rows))
            return self.git("write-tree")
        finally:
            del self.env["GIT_INDEX_FILE"]

    def commit(self, tree: str, parent: str | None, message: str) -> str:
        parents = ["-p", parent] if parent else []
        return self.git("commit-tree", tree, *parents, stdin=message)


def _walk(root: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(files as (path, git mode), symlinks as (path, target)), sorted by path."""
    files: list[tuple[str, str]] = []
    links: list[tuple[str, str]] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in EXCLUDED)
        for name in sorted(names):
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                links.append((rel, os.readlink(path)))
            else:
                executable = stat.S_IMODE(info.st_mode) & 0o111
                files.append((rel, "100755" if executable else "100644"))
    return files, links
