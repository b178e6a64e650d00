"""Workspaces across machines: what the PostgreSQL custody archive costs.

For a seeded tree of FILES files of SIZE bytes, in one process, against the
PostgreSQL store at ``--store`` (a database the script may fill; it removes
its delivery afterwards):

* local open: custody seeding the tree on one machine (the raw substrate);
* archive: sending that savepoint to the database (manifest, every content);
* hydrate elsewhere: a second custody folder (another machine) bringing its
  workspace to the archived head, checked and verified (``prepare``);
* local restore: the same restore from contents already on disk, for scale;
* prepare when current: the check every drive makes when nothing changed.

Run: ``EXECSYS_BENCH_POSTGRES=postgresql://... .venv/bin/python bench/archive_bench.py
[--files N,N] [--size BYTES]``. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._host_support import table
from contracts import DeliveryId
from execution_system.custody import FileCustody
from host._archive import ArchivedCustody
from host.storage import StorageTx
from host.storage.postgres import PostgresStorage


def _seed(folder: Path, files: int, size: int) -> None:
    for i in range(files):
        path = folder / f"pkg{i % 50}" / f"f{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size))


def measure(store: PostgresStorage, files: int, size: int) -> list[object]:
    """One row of the table."""
    assert store.archive is not None
    root = Path(tempfile.mkdtemp(prefix="archive-bench-"))

    def fenced(_delivery: str) -> AbstractContextManager[StorageTx]:
        return store.transaction()  # one process, one holder: nothing to fence

    try:
        _seed(root / "seed", files, size)
        here, there = FileCustody(root / "a"), FileCustody(root / "b")
        local = ArchivedCustody(here, store.archive, fenced)
        remote = ArchivedCustody(there, store.archive, fenced)
        delivery = DeliveryId(f"d-bench-{uuid.uuid4().hex[:12]}")
        t0 = time.perf_counter()
        head = here.open(delivery, str(root / "seed"))
        t1 = time.perf_counter()
        local.advance(delivery, head)
        t2 = time.perf_counter()
        remote.prepare(delivery)
        t3 = time.perf_counter()
        remote.prepare(delivery)
        t4 = time.perf_counter()
        here.release(delivery)
        t5 = time.perf_counter()
        assert here.restore(delivery, head).confirmed
        t6 = time.perf_counter()
        local.retire(delivery)
        there.retire(delivery)
        return [
            files,
            size,
            f"{t1 - t0:.3f}",
            f"{t2 - t1:.3f}",
            f"{t3 - t2:.3f}",
            f"{t6 - t5:.3f}",
            f"{1000 * (t4 - t3):.1f}",
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _sizes(text: str) -> Iterator[int]:
    return (int(part) for part in text.split(","))


def main() -> int:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=os.environ.get("EXECSYS_BENCH_POSTGRES"))
    parser.add_argument("--files", default="1000,10000")
    parser.add_argument("--size", type=int, default=2000)
    args = parser.parse_args()
    if not args.store:
        parser.error("--store postgresql://... (or EXECSYS_BENCH_POSTGRES) is required")
    store = PostgresStorage.open(args.store)
    try:
        store.setup()
        rows = [measure(store, files, args.size) for files in _sizes(args.files)]
    finally:
        store.close()
    table(
        "custody archive on PostgreSQL (seconds unless marked)",
        [
            "files",
            "bytes each",
            "local open",
            "archive",
            "hydrate elsewhere",
            "local restore",
            "prepare, current (ms)",
        ],
        rows,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
