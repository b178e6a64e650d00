"""Where one step of the default path goes: a profile by part, and the WAL pages each commit writes.

Used by ``default_path_bench.py --only 5``. Both run in this process, on the
loop graph of ``host_bench.py`` (one action looping through a route), with
``FileCustody`` on an empty workspace.

* **Parts.** cProfile over three deliveries of ``steps`` steps, grouped by
  cumulative time: custody (``issue``, ``validate`` with the nonce append,
  ``advance``), the Host's turn (the node handler without custody), the
  checkpoint ``put`` (the store's commit, the Host's rows, the delta encoding)
  and the rest (LangGraph and the event loop). Custody's call runs inline here
  so that the profiler sees it (the Host sends it to a worker thread; an A/B
  in this process measured no difference either way). The profiler inflates
  every figure, so compare the parts with each other.
* **WAL pages.** One delivery with the store's automatic WAL checkpoints off,
  then the frames of each commit read from the ``-wal`` file, by b-tree (from
  SQLite's ``dbstat``). Raw LangGraph's chain is read the same way.
"""

from __future__ import annotations

import asyncio
import collections
import cProfile
import sqlite3
import struct
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import _raw_langgraph as raw
from _host_support import HostUnderTest, loop_doc

import host._action as action_module
from contracts import InvocationRequest
from execution_system.custody import FileCustody


def _behaviour(steps: int) -> Any:
    async def step(req: InvocationRequest) -> dict[str, Any]:
        return {"go": "again" if req.activation < steps else "stop"}

    return step


def parts_table(steps: int) -> None:
    """Print the profile of a FileCustody step, by part."""

    async def inline(function: Any, *args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    real = vars(action_module)["asyncio"]
    patched = types.SimpleNamespace(**{n: getattr(real, n) for n in dir(real) if n[:2] != "__"})
    patched.to_thread = inline
    root = Path(tempfile.mkdtemp(prefix="breakdown-"))
    doc = loop_doc(steps + 1)
    host = HostUnderTest(root, {"step": _behaviour(steps)}, FileCustody(root / "custody"))

    async def runs(k: int) -> None:
        for _ in range(k):
            await host.run(host.delivery(doc))

    vars(action_module)["asyncio"] = patched
    try:
        asyncio.run(runs(1))
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.enable()
        asyncio.run(runs(3))
        profiler.disable()
        wall = time.perf_counter() - started
    finally:
        vars(action_module)["asyncio"] = real
        host.close()
    stats: Any = profiler.getstats()
    n = 3 * steps
    cum: dict[tuple[str, str], float] = collections.defaultdict(float)
    own: dict[str, float] = collections.defaultdict(float)
    for entry in stats:
        code = entry.code
        if isinstance(code, str):
            own[code] += entry.inlinetime
            continue
        cum[(code.co_filename, code.co_name)] += entry.totaltime

    def part(path: str, name: str) -> float:
        return sum(v for (f, fn), v in cum.items() if path in f and fn == name) * 1000 / n

    issue = part("custody/_custody.py", "issue")
    validate = part("custody/_custody.py", "validate")
    nonce = part("custody/_state.py", "use_nonce")
    advance = part("custody/_custody.py", "advance")
    commit = sum(v for k, v in own.items() if "commit" in k and "sqlite3" in k) * 1000 / n
    put = part("host/langgraph/_saver.py", "put")
    rows = part("host/_step_rows.py", "write_step_rows")
    journal = part("host/_journal_book.py", "append")
    delta = part("host/langgraph/_delta.py", "encode")
    turn = part("host/_handlers.py", "handle")
    custody = issue + validate + advance
    total = wall * 1000 / n
    print(f"5a. One step with FileCustody under cProfile, ms per step ({n} steps)")
    lines = [
        ("custody: issue", issue),
        ("custody: validate (nonce append included)", validate),
        ("  of which the nonce append (fsync)", nonce),
        ("custody: advance", advance),
        ("Host turn (node handler, custody excluded)", turn - custody),
        ("checkpoint put: the store's commit (fsync)", commit),
        ("checkpoint put: the Host's rows", rows),
        ("  of which the journal", journal),
        ("checkpoint put: delta encoding", delta),
        ("checkpoint put: the rest (fence, SQL)", put - commit - rows - delta),
        ("LangGraph and the event loop", total - turn - put),
        ("whole step", total),
    ]
    for label, value in lines:
        print(f"  {label:<46}{value:>8.3f}")


def _frames(db: Path) -> tuple[list[list[int]], dict[int, str]]:
    wal = (db.parent / (db.name + "-wal")).read_bytes()
    size = struct.unpack(">I", wal[8:12])[0]
    commits: list[list[int]] = []
    current: list[int] = []
    offset = 32
    while offset + 24 + size <= len(wal):
        page, commit = struct.unpack(">II", wal[offset : offset + 8])
        current.append(page)
        if commit:
            commits.append(current)
            current = []
        offset += 24 + size
    reader = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    names = {page: name for name, page in reader.execute("SELECT name, pageno FROM dbstat")}
    reader.close()
    return commits, names


def _tally(commits: list[list[int]], names: dict[int, str], per_step: int) -> dict[str, float]:
    """Pages per step by b-tree, over the middle of the run (no start-up or end commits)."""
    middle = commits[10:-10]
    steps = len(middle) / per_step
    counts: collections.Counter[str] = collections.Counter()
    for commit in middle:
        for page in commit:
            counts[names.get(page, "(new or freed page)")] += 1
    return {name: count / steps for name, count in counts.most_common()}


def wal_table(steps: int) -> None:
    """Print the WAL pages per step of the Host's commit and of raw LangGraph's two."""
    from tests.support.memory_custody import MemoryCustody

    root = Path(tempfile.mkdtemp(prefix="walpages-"))
    host = HostUnderTest(root / "host", {"step": _behaviour(steps)}, MemoryCustody())
    conn = host.host.store.conn
    asyncio.run(host.run(host.delivery(loop_doc(steps + 1))))  # compile, first-use writes
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    asyncio.run(host.run(host.delivery(loop_doc(steps + 1))))
    host_commits, host_names = _frames(host.store)
    host.close()

    saver = raw.saver(root / "raw" / "raw.db")
    graph = raw.chain(steps, saver)
    saver.conn.execute("PRAGMA wal_autocheckpoint=0")
    asyncio.run(graph.ainvoke({"n": 0}, raw.config("t0"), durability="sync"))
    raw_commits, raw_names = _frames(root / "raw" / "raw.db")
    saver.conn.close()

    print(f"5b. WAL pages (4 KiB) per step, steps 10 to {steps - 10} of {steps}")
    for label, commits, names, per_step in (
        ("Host (one commit per step)", host_commits, host_names, 1),
        ("raw LangGraph (two commits per step)", raw_commits, raw_names, 2),
    ):
        tally = _tally(commits, names, per_step)
        print(f"  {label}: {sum(tally.values()):.2f} pages")
        for name, per in tally.items():
            print(f"    {per:6.2f}  {name}")
