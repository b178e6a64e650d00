"""Custody benchmark: snapshot and restore a 10,000-file / ~100 MB tree.

Usage::

    .venv/bin/python bench/custody_bench.py [--files 10000] [--mb 100] [--keep]

Builds the tree in a temporary directory (random, incompressible contents),
then times, in one run and on the same tree:

* the references ``tar c DIR | sha256sum`` (read and hash everything once)
  and ``cp -a DIR COPY`` (create every file once, no fsync);
* the first snapshot (hash every file and store every blob durably);
* a re-snapshot with nothing changed, and one after changing 10 files
  (the stat cache lets both skip unchanged files);
* a full-verify snapshot (re-reads every file);
* a restore undoing the 10 changes, and a restore of the whole tree into an
  emptied workspace (every file written from the blob store, flushed, verified).

Page caches are warm throughout (the tree was just written), for the
references as for custody; every timed step starts after an ``os.sync()`` so
it does not pay for the previous step's writeback.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from contracts import DeliveryId
from execution_system.custody import FileCustody

T = TypeVar("T")
DELIVERY = DeliveryId("d-bench")


def build_tree(root: Path, files: int, total_mb: int, rng: random.Random) -> list[Path]:
    """Write ``files`` files in 100 folders; 10 large files carry ~15% of the bytes."""
    large = min(10, files)
    large_size = int(total_mb * 0.15 * 2**20) // max(large, 1)
    small_mean = int(total_mb * 0.85 * 2**20) // max(files - large, 1)
    paths = []
    for index in range(files):
        folder = root / f"pkg{index % 100:02d}" / f"sub{index % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        size = large_size if index < large else rng.randint(1, 2 * small_mean)
        path = folder / f"file{index:05d}.dat"
        path.write_bytes(rng.randbytes(size))
        paths.append(path)
    return paths


def timed(action: Callable[[], T]) -> tuple[float, T]:
    # Flush earlier writes first: otherwise the kernel throttles this step's writes
    # to clean up the previous step's dirty pages, and the figures measure that.
    os.sync()
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def tar_reference(root: Path) -> str:
    tar = subprocess.Popen(["tar", "c", "-C", str(root), "."], stdout=subprocess.PIPE)
    digest = subprocess.run(["sha256sum"], stdin=tar.stdout, capture_output=True, check=True)
    assert tar.stdout is not None
    tar.stdout.close()
    if tar.wait() != 0:
        raise RuntimeError("tar failed")
    return digest.stdout.decode().split()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="custody-bench-"))
    try:
        custody = FileCustody(tmp / "custody")
        empty = custody.open(DELIVERY)
        ws = Path(custody.workspace(DELIVERY))
        rng = random.Random(20240601)
        paths = build_tree(ws, args.files, args.mb, rng)
        total = sum(p.stat().st_size for p in paths)
        # Leave the stat cache's 50 ms "racily clean" window, as a real workspace would.
        time.sleep(0.1)

        rows: list[tuple[str, float, str]] = []
        seconds, _ = timed(lambda: tar_reference(ws))
        rows.append(("reference: tar c DIR | sha256sum", seconds, "reads all"))
        copy = tmp / "copy"
        seconds, _ = timed(lambda: subprocess.run(["cp", "-a", str(ws), str(copy)], check=True))
        rows.append(("reference: cp -a DIR COPY (no fsync)", seconds, "writes all"))
        shutil.rmtree(copy)

        seconds, first = timed(lambda: custody.snapshot(DELIVERY))
        rows.append(("first snapshot (hash + store blobs)", seconds, f"{first.hashed_files} read"))

        time.sleep(0.1)
        seconds, same = timed(lambda: custody.snapshot(DELIVERY))
        rows.append(("re-snapshot, nothing changed", seconds, f"{same.hashed_files} read"))

        for path in rng.sample(paths, 10):
            path.write_bytes(rng.randbytes(path.stat().st_size))
        time.sleep(0.1)
        seconds, changed = timed(lambda: custody.snapshot(DELIVERY))
        rows.append(("incremental snapshot, 10 changed", seconds, f"{changed.hashed_files} read"))

        seconds, full = timed(lambda: custody.snapshot(DELIVERY, full_verify=True))
        rows.append(("full-verify snapshot", seconds, f"{full.hashed_files} read"))
        assert full.savepoint == changed.savepoint

        seconds, undo = timed(lambda: custody.restore(DELIVERY, first.savepoint))
        assert undo.confirmed, undo.differences
        rows.append(("restore: undo the 10 changes", seconds, "confirmed"))

        assert custody.restore(DELIVERY, empty).confirmed
        seconds, whole = timed(lambda: custody.restore(DELIVERY, first.savepoint))
        assert whole.confirmed, whole.differences
        rows.append(("restore: whole tree into empty workspace", seconds, "confirmed"))

        print(f"tree: {len(paths):,} files, {total / 2**20:.1f} MiB, in {tmp}")
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
        print()
        print(f"| {'operation':<42} | {'seconds':>8} | {'files read / outcome':<20} |")
        print(f"|{'-' * 44}|{'-' * 10}|{'-' * 22}|")
        for name, secs, note in rows:
            print(f"| {name:<42} | {secs:>8.3f} | {note:<20} |")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
