"""CodeClosure orchestration overhead: the demo's run minus time inside workers and checks.

Runs the demo's first scenario (a wrong patch, then a repair: two generations,
seven phases each, one check per generation) on a fresh store, timing every
executor turn (runtime agents, the patch worker, the checks — each a real
process) through a wrapper around the default invoker. Orchestration is
everything else: the Host, LangGraph, custody snapshots, the journal, the
goal runtime. Target: under 5% of the run.

With ``--files N`` the project also holds N small generated files (a real
tree's size), and the report adds, per node, the time in its executor turns
(SOURCE_FREEZE is the freeze; check_tests includes the scratch copy), the
orchestration time per generation (custody snapshots and the rest), the time
in the Host's custody calls per generation and per call (target: under 1 s
on 10,000 unchanged files), the time in each step of custody's seeding (its
``open``), the CPU time of this process (the Host, custody, the journal: a
figure that load inflates far less than wall time) and of the executors, the
time of the check commands themselves (their evidence's ``duration_s``) and
everything else, and the custody bytes of the closed goal before and after
``goal export`` (which releases the workspace and prunes the rejected
generations), then the store and custody bytes left (blobs and manifests apart).

Run: ``.venv/bin/python bench/closure_bench.py [--runs N] [--files N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from execution_system.cli._demo_closure import RIGHT, SOURCE, TEST, WRONG  # noqa: E402
from execution_system.codeclosure import GoalRuntime, PatchWorker  # noqa: E402


class TimedInvoker:
    """Wraps the Host's invoker and adds up the wall time spent in executor turns."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.turns = 0
        self.by_node: dict[str, float] = {}
        self.commands = 0.0
        """Time the check commands themselves took (their evidence's ``duration_s``)."""

    async def __call__(self, request: Any, binding: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            result = await self.inner(request, binding, **kwargs)
            evidence = (getattr(result, "output", None) or {}).get("evidence")
            if isinstance(evidence, dict):
                self.commands += float(evidence.get("duration_s") or 0.0)
            return result
        finally:
            spent = time.perf_counter() - started
            self.seconds += spent
            self.turns += 1
            node = str(getattr(request, "node", "?"))
            self.by_node[node] = self.by_node.get(node, 0.0) + spent


class TimedCustody:
    """Forwards to the Host's custody and adds up the wall time of each method."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.by_method: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                self.by_method[name] = self.by_method.get(name, 0.0) + spent
                self.calls[name] = self.calls.get(name, 0) + 1

        return timed


SEED_PHASES: dict[str, float] = {}
"""Time in each step of seeding (custody's ``open``), by step."""


def _time_seed_phases() -> None:
    """Wrap the steps of custody's seeding so the report can break ``open`` down."""
    from execution_system.custody import _durable, _workspace
    from execution_system.custody._blobs import BlobBatch

    def wrap(owner: Any, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                SEED_PHASES[label] = SEED_PHASES.get(label, 0.0) + spent

        setattr(owner, name, timed)

    wrap(_workspace, "scan", "scan seed + stage blobs")
    wrap(_workspace, "_write_tree", "write workspace files")
    wrap(_durable.Flusher, "files", "flush files")
    wrap(BlobBatch, "commit", "publish blobs")
    wrap(_durable.Flusher, "dirs", "flush folders")
    wrap(_workspace, "verify", "check the copy")


DETAIL: dict[str, Any] = {}
"""What the ``--files`` run measured, reported after the event loop ends."""


def _cpu() -> tuple[float, float]:
    """CPU seconds (user + system) of this process (all its threads) and of its children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _bytes(path: Path) -> int:
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _fill(project: Path, files: int) -> None:
    for i in range(files):
        folder = project / "src" / "filler" / f"d{i // 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"m{i:05d}.py").write_text(f"VALUE_{i} = {i}\n" * 8)


async def one_run(folder: Path, files: int = 0) -> tuple[float, float, int, str]:
    project = folder / "project"
    (project / "src").mkdir(parents=True)
    _fill(project, files)
    (project / "tests").mkdir()
    (project / "src" / "calc.py").write_text(SOURCE)
    (project / "tests" / "test_calc.py").write_text(TEST)
    (folder / "wrong.patch").write_text(WRONG)
    (folder / "right.patch").write_text(RIGHT)
    runtime = GoalRuntime(f"sqlite:///{folder}/state.db")
    timer = TimedInvoker(runtime.host.invoker)
    runtime.host.invoker = timer
    custody = TimedCustody(runtime.host.custody)
    runtime.host.custody = custody
    try:
        created = runtime.create(
            objective="add() adds",
            project=str(project),
            criteria=["the test passes"],
            checks={"tests": (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider")},
            worker=PatchWorker(patches=(str(folder / "wrong.patch"), str(folder / "right.patch"))),
        )
        started, cpu = time.perf_counter(), _cpu()
        view = await runtime.start(created["goal"], created["version"])
        total = time.perf_counter() - started
        used = [after - before for before, after in zip(cpu, _cpu(), strict=True)]
        if files and view["run_status"] == "CLOSED":
            custody_root = folder / "custody"
            DETAIL["held"] = _bytes(custody_root)
            exported = runtime.export(created["goal"])
            DETAIL["exported"] = _bytes(custody_root)
            DETAIL["pruned"] = exported.get("savepoints_pruned", 0)
    finally:
        runtime.close()
    if files:
        DETAIL.update(generations=view["generation"] or 1, by_node=dict(timer.by_node), total=total)
        DETAIL["custody"] = dict(custody.by_method)
        DETAIL["calls"] = dict(custody.calls)
        DETAIL["outside"] = total - timer.seconds
        DETAIL["commands"] = timer.commands
        DETAIL["cpu"] = used
    return total, timer.seconds, timer.turns, view["run_status"]


def _report(folder: Path, files: int) -> None:
    generations = DETAIL["generations"]
    print(
        f"project: {files} generated files + 2; {generations} generations; {DETAIL['total']:.2f} s"
    )
    for node, spent in sorted(DETAIL["by_node"].items(), key=lambda item: -item[1]):
        print(f"  {node:<16} {spent:>7.2f} s in executor turns")
    outside = DETAIL["outside"]
    print(
        f"  orchestration outside executors: {outside:.2f} s, {outside / generations:.2f} s "
        "per generation (custody snapshots, Host, journal)"
    )
    spent = DETAIL["custody"]
    work = sum(spent.values())
    counts = DETAIL["calls"]
    calls = ", ".join(
        f"{name} {sec:.2f}" + (f" in {counts[name]} calls" if counts.get(name, 1) > 1 else "")
        for name, sec in sorted(spent.items(), key=lambda i: -i[1])
    )
    if SEED_PHASES:
        phases = ", ".join(f"{name} {sec:.2f}" for name, sec in SEED_PHASES.items())
        print(f"  seeding steps (all custody flushes, part of open): {phases}")
    print(
        f"  custody work (the Host's calls, part of the above): {work:.2f} s, "
        f"{work / generations:.2f} s per generation ({calls})"
    )
    steps = work - spent.get("open", 0.0)
    print(
        f"  custody work without the one-time open: {steps:.2f} s, "
        f"{steps / generations:.2f} s per generation"
    )
    own, children = DETAIL["cpu"]
    print(
        f"  CPU: this process (Host, custody, journal) {own:.2f} s; "
        f"executors and checks {children:.2f} s"
    )
    commands = DETAIL["commands"]
    rest = DETAIL["total"] - commands
    print(
        f"  the check commands themselves: {commands:.2f} s; everything else "
        f"(orchestration, runtime agents, scratch copies): {rest:.2f} s, "
        f"{rest / DETAIL['total']:.1%} of the goal"
    )
    store = sum(p.stat().st_size for p in folder.glob("state.db*"))
    records = folder / "custody" / "deliveries"
    manifests = sum(_bytes(d / "manifests") for d in records.iterdir() if d.is_dir())
    savepoints = sum(1 for d in records.iterdir() for _ in (d / "manifests").glob("*"))
    if "held" in DETAIL:
        print(
            f"  custody bytes of the closed goal {DETAIL['held'] / 1e6:.1f} MB, after "
            f"goal export {DETAIL['exported'] / 1e6:.1f} MB "
            f"({DETAIL['pruned']} savepoint(s) pruned, workspace released)"
        )
    print(
        f"  after export: store {store / 1e6:.1f} MB, "
        f"custody {_bytes(folder / 'custody') / 1e6:.1f} MB "
        f"(blobs {_bytes(folder / 'custody' / 'blobs') / 1e6:.1f} MB, {savepoints} manifests "
        f"{manifests / 1e6:.1f} MB; project {_bytes(folder / 'project') / 1e6:.1f} MB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=0, help="generated files in the project")
    args = parser.parse_args()
    if args.files:
        _time_seed_phases()
        with tempfile.TemporaryDirectory(prefix="closure-bench-") as tmp:
            folder = Path(tmp) / "r"
            total, inside, turns, status = asyncio.run(one_run(folder, args.files))
            _report(folder, args.files)
        share = (total - inside) / total
        print(f"overhead {share:.1%} of {total:.2f} s (target < 5%), status {status}")
        return
    rows = []
    for i in range(args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="closure-bench-") as tmp:
            rows.append(asyncio.run(one_run(Path(tmp) / f"r{i}")))
    cold, rows = rows[0], rows[1:]
    print(
        f"cold first run (imports LangGraph, compiles the graph): {cold[0]:.2f} s total, "
        f"{cold[0] - cold[1]:.2f} s outside executors ({(cold[0] - cold[1]) / cold[0]:.1%})"
    )
    print("CodeClosure demo scenario 1 (two generations), orchestration overhead")
    print(
        f"{'run':>3} {'total s':>8} {'in executors s':>15} {'turns':>6} {'overhead s':>11} "
        f"{'overhead':>9}  status"
    )
    shares = []
    for i, (total, inside, turns, status) in enumerate(rows, 1):
        overhead = total - inside
        shares.append(overhead / total)
        print(
            f"{i:>3} {total:>8.2f} {inside:>15.2f} {turns:>6} {overhead:>11.3f} "
            f"{overhead / total:>8.1%}  {status}"
        )
    share = statistics.median(shares)
    print(f"median overhead {share:.1%} (target < 5%): {'met' if share < 0.05 else 'MISSED'}")


if __name__ == "__main__":
    main()
