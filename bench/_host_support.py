"""Shared plumbing of ``host_bench.py``: a Host under test, timing, tables, graphs."""

from __future__ import annotations

import sqlite3
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from contracts import (  # noqa: E402
    AdmittedDelivery,
    Custody,
    ExecutorBinding,
    InvocationRequest,
    InvocationResult,
    LangGraphHostConfig,
)
from runner import RunnerFactory, parse_result  # noqa: E402
from tests.host.harness import graph_doc, make_delivery  # noqa: E402

Behaviour = Callable[[InvocationRequest], Awaitable[dict[str, Any]]]


# --- plumbing ---------------------------------------------------------------------------


class BenchInvoker:
    """Calls one behaviour per executor name (the binding is the harness's scripted one)."""

    def __init__(self, behaviours: dict[str, Behaviour]) -> None:
        self.behaviours = behaviours

    async def __call__(
        self,
        request: InvocationRequest,
        binding: ExecutorBinding,
        *,
        capability: str,
        workspace: str | None,
    ) -> InvocationResult:
        name = binding.scripted[0]["executor"]  # type: ignore[union-attr]
        reply = await self.behaviours[name](request)
        return parse_result({"status": "completed", "output": reply})


class HostUnderTest:
    """One Host on its own store file, created through the RunnerFactory."""

    def __init__(self, folder: Path, behaviours: dict[str, Behaviour], custody: Custody) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.store = folder / "state.db"
        config = LangGraphHostConfig(engine="langgraph", store=f"sqlite:///{self.store}")
        self.runner = RunnerFactory(config).create(
            custody=custody, invoker=BenchInvoker(behaviours)
        )
        self.host: Any = self.runner.host
        self._n = 0

    def delivery(self, doc: dict[str, Any], value: dict[str, Any] | None = None) -> Any:
        """A freshly admitted delivery of ``doc`` (unique nonce)."""
        self._n += 1
        return make_delivery(doc, value, nonce=f"bench-{self._n}")

    async def run(self, delivery: AdmittedDelivery) -> None:
        report = await self.host.run(delivery)
        if report.status != "completed":
            raise RuntimeError(f"delivery ended {report.status}: {report}")

    def close(self) -> None:
        self.runner.close()


@dataclass
class Timed:
    wall: float
    cpu: float


async def timed(work: Callable[[], Awaitable[Any]]) -> Timed:
    c0, w0 = time.process_time(), time.perf_counter()
    await work()
    return Timed(time.perf_counter() - w0, time.process_time() - c0)


def med(values: Sequence[float]) -> float:
    return statistics.median(values)


def table(title: str, head: Sequence[str], rows: Sequence[Sequence[Any]], note: str = "") -> None:
    """Print an aligned plain-text table (first column left, the rest right)."""
    cells = [[str(c) for c in head]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]

    def line(row: Sequence[str]) -> str:
        pairs = enumerate(zip(row, widths, strict=True))
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in pairs)

    print(f"\n{title}")
    print(line(cells[0]))
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        print(line(row))
    if note:
        for part in note.strip().splitlines():
            print(f"  {part}")
    sys.stdout.flush()


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def file_sizes(db: Path) -> tuple[int, int, int]:
    """(main file, -wal, logical database) sizes in bytes.

    The logical size is page_count x page_size as a reader sees it (WAL
    included): what the file would hold after a full checkpoint.
    """
    wal = Path(f"{db}-wal")
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    return (db.stat().st_size, wal.stat().st_size if wal.exists() else 0, pages * size)


def kib(n: int) -> str:
    return f"{n / 1024:,.0f} KiB"


# --- graphs (control-graph documents) -------------------------------------------------------


def loop_doc(max_visits: int, outputs: dict[str, Any] | None = None, **inputs: str) -> Any:
    """One action node looping on itself through a route, then a terminal."""
    node: dict[str, Any] = {
        "kind": "action",
        "executor": "step",
        "outputs": {**(outputs or {}), "go": {"enum": ["again", "stop"]}},
        "routes": {"port": "go", "cases": {"again": "step", "stop": "done"}},
        "max_visits": max_visits,
    }
    if inputs:
        node["inputs"] = dict(inputs)
    return graph_doc({"step": node, "done": {"kind": "terminal", "outcome": "succeeded"}}, "step")


def fan_doc(width: int) -> Any:
    branches = [f"b{i}" for i in range(width)]
    nodes: dict[str, Any] = {
        "plan": {
            "kind": "action",
            "executor": "plan",
            "outputs": {"pick": {"type": "array", "items": {"enum": branches}}},
            "next": "par",
        },
        "par": {
            "kind": "parallel",
            "branches": branches,
            "select": "plan.pick",
            "barrier": "gather",
        },
        "gather": {"kind": "barrier", "next": "done"},
        "done": {"kind": "terminal", "outcome": "succeeded"},
    }
    for b in branches:
        nodes[b] = {
            "kind": "action",
            "executor": "branch",
            "outputs": {"ok": {"type": "boolean"}},
            "next": "gather",
        }
    return graph_doc(nodes, "plan")


def single_doc() -> Any:
    return graph_doc(
        {
            "work": {
                "kind": "action",
                "executor": "work",
                "outputs": {"ok": {"type": "boolean"}},
                "next": "done",
            },
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        "work",
    )
