"""Delivering an accepted change: ``goal export`` (a unified diff) and ``goal apply``.

The base is the tree custody recorded when the goal's delivery opened (its
first savepoint, whose digest DISCOVERY recorded as ``base``); the change is
the accepted tree (the head after CLOSEOUT, whose digest is the accepted
frozen digest). Both are written out of custody's store into a scratch
folder, so the export works after the project folder moved on. Nothing is
ever written into a user's folder but by ``apply``, and only onto a folder
whose digest is the goal's base; the result is checked to be the accepted
digest.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from contracts import DeliveryId, ErrorCode, SavepointId, error
from execution_system.codeclosure._source import source_digest, source_files


def accepted(row: dict[str, Any], host: Any) -> dict[str, Any]:
    """What was accepted: delivery, base digest, accepted digest, manifest; or refused."""
    goal_id, delivery = row["id"], row["delivery"]
    report = host.status(delivery) if delivery else None
    if report is None or report.status.value != "completed" or report.outcome != "succeeded":
        raise error(
            ErrorCode.GOAL_NOT_ACCEPTED,
            "the goal has no accepted change (it is not CLOSED)",
            path=goal_id,
            expected="a CLOSED goal",
        )
    found: dict[str, Any] = {"goal": goal_id, "delivery": delivery}
    for line in host.journal_lines(delivery)[1:]:
        event = json.loads(line)
        if event["transition"] != "work-completed":
            continue
        ref = next((r for r in event.get("refs", []) if r["kind"] == "output"), None)
        output = host.record(ref["digest"]) if ref else None
        if not isinstance(output, dict):
            continue
        if event["node"] == "DISCOVERY":
            found["base"] = output["facts"]["base"]
        if event["node"] == "CLOSEOUT":
            found["frozen"], found["manifest"] = output["frozen"], output["manifest"]
            moment = datetime.fromisoformat(event["time"].replace("Z", "+00:00"))
            found["closed"] = f"@{int(moment.timestamp())} +0000"
    return found


@contextmanager
def trees(
    custody: Any, delivery: str, facts: dict[str, Any], first: SavepointId, head: SavepointId
) -> Iterator[tuple[Path, Path]]:
    """(base, accepted) trees written out of custody into a scratch folder, verified.

    ``first`` is the delivery's first savepoint (the base) and ``head`` its
    last (the accepted tree); both must be in ``custody``.
    """
    with tempfile.TemporaryDirectory(prefix="execsys-export-") as scratch:
        base, accepted_tree = Path(scratch) / "base", Path(scratch) / "accepted"
        custody.export(DeliveryId(delivery), first, base)
        custody.export(DeliveryId(delivery), head, accepted_tree)
        for tree, want, what in ((base, "base", "base"), (accepted_tree, "frozen", "accepted")):
            if source_digest(tree)[0] != facts[want]:
                raise error(
                    ErrorCode.GOAL_MANIFEST_MISMATCH,
                    f"custody's {what} tree is not the digest the goal recorded",
                    path=facts["goal"],
                    expected=facts[want],
                )
        yield base, accepted_tree


def changed(base: Path, after: Path) -> list[str]:
    """Paths added, removed or changed (content or mode), sorted."""
    old, new = source_files(base), source_files(after)
    return sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p))


def _part_applied(target: Path, base: Path, after: Path, exclude: tuple[str, ...]) -> bool:
    """Whether ``target`` is the base with only some of the change in place.

    That is what an apply killed between its renames leaves: every path is as in
    the base or as in the accepted tree, and nothing else differs.
    """
    found = source_files(target, exclude=exclude)
    old = source_files(base, exclude=exclude)
    new = source_files(after, exclude=exclude)
    return all(
        found.get(p) in (old.get(p), new.get(p)) for p in found.keys() | old.keys() | new.keys()
    )


def _lines(path: Path) -> list[str] | None:
    if not path.exists() and not path.is_symlink():
        return []
    if path.is_symlink():
        return None
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.splitlines(True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def unified_diff(base: Path, after: Path, paths: list[str]) -> str:
    """A ``patch -p1`` / ``git apply`` diff from ``base`` to ``after`` over ``paths``."""
    parts: list[str] = []
    for rel in paths:
        before, now = base / rel, after / rel
        old, new = _lines(before), _lines(now)
        if old is None or new is None:
            raise error(
                ErrorCode.GOAL_INVALID,
                "a binary file or symlink changed; a text diff cannot carry it",
                path=rel,
                expected="'goal apply', which copies the accepted tree's files",
            )
        existed, exists = before.exists(), now.exists()
        parts.append(f"diff --git a/{rel} b/{rel}\n")
        if not existed:
            parts.append(f"new file mode {_mode(now):o}\n")
        elif not exists:
            parts.append(f"deleted file mode {_mode(before):o}\n")
        elif _mode(before) != _mode(now):
            parts.append(f"old mode {_mode(before):o}\nnew mode {_mode(now):o}\n")
        parts.extend(
            difflib.unified_diff(
                old,
                new,
                f"a/{rel}" if existed else "/dev/null",
                f"b/{rel}" if exists else "/dev/null",
            )
        )
    return "".join(parts)


def _mode(path: Path) -> int:
    return 0o100000 | (0o755 if stat.S_IMODE(path.stat().st_mode) & 0o111 else 0o644)


EXPORTED = "exported "
"""How a goal note recording an export begins (``GoalRuntime.record_export``)."""

STAGED = ".execsys-apply"
"""Suffix of the copies ``apply_to`` writes beside their destinations before renaming them."""


def apply_to(
    target: Path,
    base: Path,
    after: Path,
    facts: dict[str, Any],
    exclude: tuple[str, ...] = (),
) -> list[str]:
    """Make ``target`` (which must be the goal's base) the accepted tree; the changed paths.

    Every new or changed file is first copied beside its destination
    (``.NAME.execsys-apply``); only when all copies are written are they renamed
    into place and removed files deleted. A failure while copying (a full disk,
    a folder that cannot be written) removes the copies and leaves ``target``
    as it was. A ``target`` that already is the accepted tree is left alone
    (an apply that completed before its command was interrupted); one killed
    between its renames, with each path either as in the base or as accepted,
    is completed. The result is checked against the accepted digest at the
    end. ``exclude`` is the goal's own excluded folders: left out of both
    digests, never touched.
    """
    if not target.is_dir():
        raise error(
            ErrorCode.GOAL_INVALID, "not a directory", path=os.fspath(target), expected="a folder"
        )
    for leftover in target.rglob(f".*{STAGED}"):  # copies an interrupted apply left behind
        leftover.unlink(missing_ok=True)
    found, _ = source_digest(target, exclude)
    if found == facts["frozen"]:
        return []
    if found != facts["base"] and not _part_applied(target, base, after, exclude):
        raise error(
            ErrorCode.GOAL_MANIFEST_MISMATCH,
            f"the folder is not the goal's base (its digest is {found}): "
            "a dirty or different checkout",
            path=os.fspath(target),
            expected=f"a clean checkout of the base {facts['base']}",
        )
    paths = changed(base, after)
    kept = [rel for rel in paths if (after / rel).exists() or (after / rel).is_symlink()]
    staged = _stage(target, after, kept)
    for rel, copy in staged:
        os.replace(copy, target / rel)
    for rel in sorted(set(paths) - set(kept)):
        (target / rel).unlink(missing_ok=True)
    result, _ = source_digest(target, exclude)
    if result != facts["frozen"]:
        raise error(
            ErrorCode.GOAL_MANIFEST_MISMATCH,
            f"after applying, the folder's digest is {result}, not the accepted one "
            "(was it changed while the apply ran?)",
            path=os.fspath(target),
            expected=facts["frozen"],
        )
    return paths


def _stage(target: Path, after: Path, paths: list[str]) -> list[tuple[str, Path]]:
    """Copy each of ``paths`` from ``after`` beside its place in ``target``; undone on failure."""
    staged: list[tuple[str, Path]] = []
    made: list[Path] = []
    try:
        for rel in paths:
            source, dest = after / rel, target / rel
            missing = [d for d in (dest.parent, *dest.parent.parents) if not d.exists()]
            dest.parent.mkdir(parents=True, exist_ok=True)
            made.extend(reversed(missing))
            copy = dest.with_name(f".{dest.name}{STAGED}")
            copy.unlink(missing_ok=True)
            if source.is_symlink():
                os.symlink(os.readlink(source), copy)
            else:
                shutil.copy2(source, copy)
            staged.append((rel, copy))
    except OSError as exc:
        for _, copy in staged:
            copy.unlink(missing_ok=True)
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise error(
            ErrorCode.FILE_NOT_WRITABLE,
            f"could not write the accepted change ({exc.strerror or exc}); "
            "the folder was left as it was",
            path=os.fspath(target),
            expected="a folder this user can write, with room for the changed files",
        ) from None
    return staged
