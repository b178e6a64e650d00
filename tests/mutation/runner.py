"""Apply each hand-written mutant to a private copy of the tree and run its tests.

The working tree is never written: the tracked and untracked (not ignored)
files are copied once into a temporary directory, and each mutant is applied
there, tested, and undone before the next. The copy is put first on
``PYTHONPATH`` so it, not the editable install, is what the tests import.

A mutant is *killed* when its tests fail (or time out), *survived* when they
pass. A survivor judged equivalent (``Mutant.equivalent`` says why) does not
count against the check; any other survivor makes the run exit 1.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tests.mutation.mutants import MUTANTS, Mutant

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600


def copy_tree(target: Path) -> None:
    """Copy every file git knows of (tracked, or untracked and not ignored) into ``target``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in listed:
        if not raw:
            continue
        source = ROOT / os.fsdecode(raw)
        if not source.is_file() and not source.is_symlink():
            continue  # deleted in the working tree but still in the index
        destination = target / os.fsdecode(raw)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination, follow_symlinks=False)


def environment(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def check_isolation(tree: Path) -> None:
    """Refuse to run unless the packages under test import from the copy."""
    probe = (
        "import contracts, host, runner, execution_system as e; print(host.__file__, e.__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tree,
        env=environment(tree),
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    if not all(Path(path).resolve().is_relative_to(tree.resolve()) for path in out):
        raise SystemExit(f"mutate: the packages import from {out}, not from the copy {tree}")


def run_tests(tree: Path, tests: Sequence[str], *, first_failure: bool) -> tuple[bool, str]:
    """Run pytest on ``tests`` in the copy; (passed, last line of its output)."""
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow"]
    if first_failure:
        argv.append("-x")
    try:
        done = subprocess.run(
            [*argv, *tests],
            cwd=tree,
            env=environment(tree),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return False, f"timed out after {TIMEOUT_S}s"
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return done.returncode == 0, lines[-1] if lines else f"exit {done.returncode}"


def write_source(path: Path, text: str) -> None:
    """Write a module and drop its cached bytecode, so the next import compiles this text."""
    path.write_text(text)
    for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        cached.unlink()


def apply(tree: Path, mutant: Mutant) -> str:
    """Write the mutant into the copy; return the file's original text."""
    path = tree / mutant.file
    text = path.read_text()
    found = text.count(mutant.original)
    if found != 1:
        raise SystemExit(
            f"mutate: {mutant.id}: the original snippet occurs {found} times in {mutant.file}; "
            "update tests/mutation/mutants.py"
        )
    write_source(path, text.replace(mutant.original, mutant.replacement))
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__)
    parser.add_argument("ids", nargs="*", help="run only these mutants (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip the run of the unmutated copy"
    )
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.ids or m.id in args.ids]
    unknown = set(args.ids) - {m.id for m in MUTANTS}
    if unknown:
        parser.error(f"unknown mutant(s): {', '.join(sorted(unknown))}")
    if args.list:
        for m in chosen:
            print(f"{m.id:28} {m.file:44} {m.what}")
        return 0
    with tempfile.TemporaryDirectory(prefix="execsys-mutate-") as scratch:
        tree = Path(scratch) / "tree"
        copy_tree(tree)
        check_isolation(tree)
        if not args.no_baseline:
            everything = sorted({t for m in chosen for t in m.tests})
            ok, last = run_tests(tree, everything, first_failure=False)
            if not ok:
                print(f"mutate: the unmutated tree fails its own tests ({last})", file=sys.stderr)
                return 2
            print(f"baseline: {last}")
        rows: list[tuple[Mutant, str, float, str]] = []
        for m in chosen:
            original = apply(tree, m)
            started = time.monotonic()
            try:
                passed, last = run_tests(tree, m.tests, first_failure=True)
            finally:
                write_source(tree / m.file, original)
            verdict = "survived" if passed else "killed"
            if passed and m.equivalent:
                verdict = "equivalent"
            rows.append((m, verdict, time.monotonic() - started, last))
            print(f"{m.id:28} {verdict:10} {rows[-1][2]:6.1f}s  {m.what}", flush=True)
    return report(rows)


def report(rows: list[tuple[Mutant, str, float, str]]) -> int:
    killed = sum(1 for _, verdict, _, _ in rows if verdict == "killed")
    equivalent = [m for m, verdict, _, _ in rows if verdict == "equivalent"]
    survivors = [m for m, verdict, _, _ in rows if verdict == "survived"]
    dead_but_marked = [m for m, verdict, _, _ in rows if verdict == "killed" and m.equivalent]
    total = len(rows)
    counted = total - len(equivalent)
    print()
    print(
        f"mutants: {total}  killed: {killed}  equivalent: {len(equivalent)}  "
        f"survived: {len(survivors)}"
    )
    if total:
        print(
            f"kill rate: {killed}/{total} = {100 * killed / total:.1f}% of all mutants; "
            f"{killed}/{counted} = {100 * killed / max(counted, 1):.1f}% of non-equivalent ones"
        )
    for m in equivalent:
        print(f"equivalent {m.id}: {m.equivalent}")
    for m in dead_but_marked:
        print(f"note: {m.id} is marked equivalent but was killed; drop the mark")
    for m in survivors:
        print(f"SURVIVED {m.id}: {m.what} ({m.file})")
    return 1 if survivors else 0


if __name__ == "__main__":
    raise SystemExit(main())
