"""The default path as a user runs it: ``execsys run`` with FileCustody, against raw LangGraph.

Two tables, every figure from whole processes started by this script:

1. **Per-step slope.** A spec chaining N trivial python actions is run with
   ``execsys run SPEC --store sqlite:///...`` (the default ``FileCustody``
   beside the store); the raw side is a process that builds a LangGraph
   chain of N trivial nodes on the stock ``SqliteSaver`` (WAL,
   ``synchronous=FULL``, ``durability="sync"``) and runs it once. The slope
   ``(t(240) - t(40)) / 200`` removes start-up, imports and admission, so what
   is left is the price of one more step. Host and raw repetitions
   alternate, so a noisy neighbour hits both alike; medians are reported.
   Target: Host <= 1.25x raw. The CPU columns (user + system time of the
   child processes, same slope) move less with the machine's load than wall
   time, which also holds every fsync wait.
2. **Flat in length.** One 1,000-step delivery whose action records the
   time and the process's CPU time each time it runs; the per-step cost of
   steps 900-1,000 is compared with that of steps 1-100, wall (median) and
   CPU (mean). Target: within 10%. With ``--only 2`` the sides alternate
   ``--reps`` times.
3. **Graph build.** Load + admit + compile of a 2,000-node chain spec, per
   node, in this process. Target: <= 0.1 ms/node.
4. **Custody alone** (``--only 4``, not in the default set): issue + validate
   + advance of ``FileCustody`` for ``--long`` steps on an empty workspace,
   the first tenth against the last.
5. **Breakdown** (``--only 5``, not in the default set): one step by part
   under cProfile, and the WAL pages each commit writes, Host and raw
   (``bench/_step_breakdown.py``).

Usage: ``.venv/bin/python bench/default_path_bench.py [--reps 5] [--only 1,2,3] [--long 1000]
[--baseline DIR]`` (``DIR``: a checkout whose code table 1 also runs, e.g. ``git archive main``).
No assertions: targets are printed as met / MISSED.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
EXECSYS = [PYTHON, "-c", "import sys; from execution_system.cli import main; sys.exit(main())"]

AGENT = '''\
"""Trivial action for the default-path bench; optionally stamps the time it ran."""
import os
import time

_STAMPS = os.environ.get("BENCH_STAMPS")


async def step(request):
    if _STAMPS:
        with open(_STAMPS, "a") as out:
            out.write(f"{time.perf_counter_ns()} {time.process_time_ns()}\\n")
    return {"status": "completed", "output": {}}
'''

RAW = """\
import sqlite3, sys, itertools
from typing import TypedDict
from langgraph.graph import END, START, StateGraph
from langgraph.checkpoint.sqlite import SqliteSaver

class S(TypedDict, total=False):
    n: int

n, path = int(sys.argv[1]), sys.argv[2]
conn = sqlite3.connect(path, check_same_thread=False)
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("PRAGMA synchronous=FULL")
saver = SqliteSaver(conn)
saver.setup()

def step(state):
    return {"n": state.get("n", 0) + 1}

b = StateGraph(S)
names = [f"s{i}" for i in range(n)]
for name in names:
    b.add_node(name, step)
b.add_edge(START, names[0])
for x, y in itertools.pairwise(names):
    b.add_edge(x, y)
b.add_edge(names[-1], END)
g = b.compile(checkpointer=saver)
out = g.invoke({"n": 0}, {"configurable": {"thread_id": "t"}, "recursion_limit": 10**6},
               durability="sync")
assert out["n"] == n, out
"""


def chain_spec(n: int) -> str:
    """A spec of ``n`` chained trivial actions and a terminal."""
    lines = [
        "spec: execution-system/v1",
        f"graph: chain-{n}",
        "input: {type: object}",
        "start: s0",
        "nodes:",
    ]
    for i in range(n):
        nxt = f"s{i + 1}" if i + 1 < n else "done"
        lines.append(f"  s{i}: {{kind: action, executor: step, next: {nxt}}}")
    lines.append("  done: {kind: terminal, outcome: succeeded}")
    return "\n".join(lines) + "\n"


def prepare(folder: Path, sizes: list[int]) -> None:
    """Write the agent, the runner config, the raw script and one spec per size."""
    (folder / "agents").mkdir(parents=True, exist_ok=True)
    (folder / "agents" / "__init__.py").write_text("")
    (folder / "agents" / "trivial.py").write_text(AGENT)
    (folder / "execsys.yaml").write_text(
        'executors:\n  step: {python: "agents.trivial:step", timeout_s: 60}\n'
    )
    (folder / "raw.py").write_text(RAW)
    for n in sizes:
        (folder / f"chain{n}.yaml").write_text(chain_spec(n))


#: CPU seconds (user + system) of the last child each ``run_*`` started.
LAST_CPU = [0.0]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_host(folder: Path, n: int, tag: str, env: dict[str, str] | None = None) -> float:
    """Wall seconds of one ``execsys run`` of the N-chain on a fresh store.

    ``env`` may set ``PYTHONPATH`` to a checkout of other code (the baseline side).
    """
    store = folder / f"store-{tag}" / "state.db"
    command = [
        *EXECSYS,
        "run",
        str(folder / f"chain{n}.yaml"),
        "--store",
        f"sqlite:///{store}",
        "--json",
    ]
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(
        command,
        cwd=folder,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )
    spent = time.perf_counter() - started
    LAST_CPU[0] = _children_cpu() - cpu
    if done.returncode != 0 or '"completed"' not in done.stdout:
        raise SystemExit(f"execsys run failed ({done.returncode}): {done.stdout}{done.stderr}")
    return spent


def run_raw(folder: Path, n: int, tag: str) -> float:
    """Wall seconds of one raw LangGraph process running the N-chain on a fresh db."""
    db = folder / f"raw-{tag}.db"
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(
        [PYTHON, str(folder / "raw.py"), str(n), str(db)],
        capture_output=True,
        text=True,
        check=False,
    )
    spent = time.perf_counter() - started
    LAST_CPU[0] = _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"raw run failed: {done.stderr}")
    return spent


def slope_table(
    folder: Path, reps: int, small: int, large: int, baseline: Path | None = None
) -> None:
    """Table 1: per-step slope, Host and raw alternating (and a baseline checkout, if given)."""
    prepare(folder, [small, large])
    times: dict[tuple[str, int], list[float]] = {}
    cpus: dict[tuple[str, int], list[float]] = {}
    base_env = {"PYTHONPATH": str(baseline)} if baseline else None
    sides = ["host", "raw"] + (["base"] if baseline else [])

    def one(side: str, n: int, tag: str) -> float:
        if side == "raw":
            return run_raw(folder, n, tag)
        return run_host(folder, n, tag, env=base_env if side == "base" else None)

    for side in sides:
        one(side, small, f"warm-{side}")
    for rep in range(reps):
        for n in (small, large) if rep % 2 == 0 else (large, small):
            for side in sides if rep % 2 == 0 else sides[::-1]:
                times.setdefault((side, n), []).append(one(side, n, f"{side}-{n}-{rep}"))
                cpus.setdefault((side, n), []).append(LAST_CPU[0])
    span = large - small
    print(f"1. Per-step slope (t({large}) - t({small})) / {span}, whole processes, {reps} reps")
    print(
        f"{'':<34}{'t(small) s':>11}{'t(large) s':>11}{'ms/step':>9}{'x raw':>7}"
        f"{'CPU ms/step':>13}{'CPU x raw':>11}"
    )
    slopes = {}
    cpu_slopes = {}
    per_rep = {}
    labels = [("raw", "raw LangGraph SqliteSaver"), ("host", "execsys run, FileCustody")]
    if baseline:
        labels.append(("base", f"same, code of {baseline.name}"))
    for side, label in labels:
        t_small = statistics.median(times[(side, small)])
        t_large = statistics.median(times[(side, large)])
        slopes[side] = (t_large - t_small) / span * 1000
        per_rep[side] = [
            (b - a) / span * 1000
            for a, b in zip(times[(side, small)], times[(side, large)], strict=True)
        ]
        ratio = slopes[side] / slopes["raw"]
        cpu_small = statistics.median(cpus[(side, small)])
        cpu_slopes[side] = (statistics.median(cpus[(side, large)]) - cpu_small) / span * 1000
        cpu_ratio = cpu_slopes[side] / cpu_slopes["raw"]
        print(
            f"{label:<34}{t_small:>11.3f}{t_large:>11.3f}{slopes[side]:>9.3f}{ratio:>7.2f}"
            f"{cpu_slopes[side]:>13.3f}{cpu_ratio:>11.2f}"
        )
    ratios = [h / r for h, r in zip(per_rep["host"], per_rep["raw"], strict=True) if r > 0]
    ratio = slopes["host"] / slopes["raw"]
    print(
        f"  per-repetition ratio range {min(ratios):.2f}-{max(ratios):.2f}; "
        f"target host <= 1.25x raw: {ratio:.2f}x -> "
        f"{'met' if 0 < ratio <= 1.25 else 'MISSED' if ratio > 0 else 'not measured (noise)'}"
    )


def _gaps(
    folder: Path, steps: int, tag: str, env: dict[str, str]
) -> tuple[list[float], list[float]]:
    """Wall and CPU ms between consecutive steps of one delivery (CPU: the whole process)."""
    stamps = folder / f"stamps-{tag}.txt"
    stamps.unlink(missing_ok=True)
    run_host(folder, steps, f"long-{tag}", env={**env, "BENCH_STAMPS": str(stamps)})
    marks = [tuple(int(x) for x in line.split()) for line in stamps.read_text().splitlines()]
    if len(marks) != steps:
        raise SystemExit(f"expected {steps} stamps, got {len(marks)}")
    wall = [(b[0] - a[0]) / 1e6 for a, b in itertools.pairwise(marks)]
    cpu = [(b[1] - a[1]) / 1e6 for a, b in itertools.pairwise(marks)]
    return wall, cpu


def flat_table(folder: Path, steps: int, baseline: Path | None = None, reps: int = 1) -> None:
    """Table 2: per-step cost at the start and the end of one long delivery (per code side).

    Wall: median ms between consecutive steps. CPU: mean CPU ms of the process
    per step (user + system, every thread), which the machine's load moves
    far less. With ``reps`` > 1 the sides alternate and each row is one run.
    """
    prepare(folder, [steps])
    sides: list[tuple[str, dict[str, str]]] = [("this code", {})]
    if baseline:
        sides.append((f"code of {baseline.name}", {"PYTHONPATH": str(baseline)}))
    tenth = max(1, steps // 10)
    head, tail = f"1-{tenth}", f"{steps - tenth}-{steps}"
    print(f"2. Flat in length: one {steps}-step delivery per run, ms per step")
    print(
        f"{'':<22}{'wall ' + head:>14}{'wall ' + tail:>16}{'change':>9}"
        f"{'CPU ' + head:>13}{'CPU ' + tail:>15}{'change':>9}"
    )
    for rep in range(reps):
        for label, env in sides if rep % 2 == 0 else sides[::-1]:
            wall, cpu = _gaps(folder, steps, f"{label.replace(' ', '-')}-{rep}", env)
            first = statistics.median(wall[: tenth - 1])
            last = statistics.median(wall[-tenth:])
            cpu_first = statistics.mean(cpu[: tenth - 1])
            cpu_last = statistics.mean(cpu[-tenth:])
            growth = last / first - 1
            cpu_growth = cpu_last / cpu_first - 1
            verdict = "met" if abs(cpu_growth) <= 0.10 else "MISSED"
            print(
                f"{label:<22}{first:>14.3f}{last:>16.3f}{growth:>+9.1%}"
                f"{cpu_first:>13.3f}{cpu_last:>15.3f}{cpu_growth:>+9.1%}  CPU within 10%: {verdict}"
            )


CUSTODY_LOOP = """
import sys, tempfile, time
from pathlib import Path
from contracts import CustodyPreview, DeliveryId, ExecutionSite, digest_of
from execution_system.custody import FileCustody

steps = int(sys.argv[1])
custody = FileCustody(Path(tempfile.mkdtemp(dir=sys.argv[2])) / "custody")
delivery = DeliveryId("d1")
custody.open(delivery)
marks = []
for i in range(1, steps + 1):
    site = ExecutionSite(delivery=delivery, node="s", activation=i, invocation=f"i{i}", attempt=1)
    cap = custody.issue(site, "write")
    preview = CustodyPreview(capability=cap.token, site=site, update_digest=digest_of({}))
    verdict = custody.validate(preview)
    custody.advance(delivery, verdict.savepoint)
    marks.append(f"{time.perf_counter()},{time.process_time()}")
print(" ".join(marks))
"""


def custody_table(folder: Path, steps: int, baseline: Path | None = None, reps: int = 1) -> None:
    """Table 4: FileCustody alone, issue + validate + advance per step, start vs end.

    Wall time (mean between marks) and the process's CPU time, per step; with a
    baseline the sides alternate ``reps`` times.
    """
    folder.mkdir(parents=True, exist_ok=True)
    sides: list[tuple[str, dict[str, str]]] = [("this code", {})]
    if baseline:
        sides.append((f"code of {baseline.name}", {"PYTHONPATH": str(baseline)}))
    tenth = max(1, steps // 10)
    print(f"4. FileCustody alone, {steps} steps on an empty workspace, ms per step (mean)")
    print(
        f"{'':<22}{f'wall 1-{tenth}':>14}{f'wall {steps - tenth}-{steps}':>16}"
        f"{f'CPU 1-{tenth}':>13}{f'CPU {steps - tenth}-{steps}':>15}"
    )
    for _ in range(reps):
        for label, env in sides:
            done = subprocess.run(
                [PYTHON, "-c", CUSTODY_LOOP, str(steps), str(folder)],
                capture_output=True,
                text=True,
                env={**os.environ, **env},
                check=True,
            )
            marks = [tuple(map(float, m.split(","))) for m in done.stdout.split()]
            row = [
                (marks[end][i] - marks[start][i]) / tenth * 1000
                for i in (0, 1)
                for start, end in ((0, tenth), (-1 - tenth, -1))
            ]
            print(f"{label:<22}{row[0]:>14.3f}{row[1]:>16.3f}{row[2]:>13.3f}{row[3]:>15.3f}")


def build_table(nodes: int, reps: int) -> None:
    """Table 3: load + admit + compile of an N-node chain spec, per node (in this process).

    Compile is the Host's (``host/langgraph/_compile.py``). Each part is timed in
    wall time and in this process's CPU time; on a loaded machine the CPU
    figures are the ones that carry over.
    """
    sys.path.insert(0, str(ROOT))
    from execution_system import check_graph, parse_document, parse_graph
    from host import OPERATIONS
    from host.langgraph import _compile

    text = chain_spec(nodes).encode()
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for _ in range(reps):
        marks = [(time.perf_counter(), time.process_time())]
        document = parse_document(text, name="chain.yaml")
        marks.append((time.perf_counter(), time.process_time()))
        graph = parse_graph(document)
        check_graph(graph, frozenset(OPERATIONS))
        marks.append((time.perf_counter(), time.process_time()))
        _compile.GraphCache(None)._compile(graph)
        marks.append((time.perf_counter(), time.process_time()))
        for index, key in enumerate(("load", "admit", "compile")):
            wall.setdefault(key, []).append((marks[index + 1][0] - marks[index][0]) * 1000 / nodes)
            cpu.setdefault(key, []).append((marks[index + 1][1] - marks[index][1]) * 1000 / nodes)
    print(f"3. Graph build, {nodes}-node chain, ms per node (median of {reps}; best in brackets)")
    print(f"{'':>6}{'load':>16}{'admit':>16}{'compile':>16}{'total':>16}")
    totals: dict[str, float] = {}
    for label, table in (("wall", wall), ("CPU", cpu)):
        cells = []
        for key in ("load", "admit", "compile"):
            cells.append(f"{statistics.median(table[key]):.4f} ({min(table[key]):.4f})")
        parts = [table[k] for k in ("load", "admit", "compile")]
        sums = [sum(rep) for rep in zip(*parts, strict=True)]
        totals[label] = statistics.median(sums)
        cells.append(f"{totals[label]:.4f} ({min(sums):.4f})")
        print(f"{label:>6}" + "".join(f"{cell:>16}" for cell in cells))
    verdict = "met" if totals["wall"] <= 0.1 else "MISSED"
    print(
        f"  target load + admit + compile <= 0.1 ms/node: wall {totals['wall']:.3f}, "
        f"CPU {totals['CPU']:.3f} -> {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=textwrap.dedent(__doc__ or ""))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--only", default="1,2,3")
    parser.add_argument("--nodes", type=int, default=2000, help="graph size of table 3")
    parser.add_argument("--small", type=int, default=40)
    parser.add_argument("--large", type=int, default=240)
    parser.add_argument("--long", type=int, default=1000)
    parser.add_argument(
        "--baseline", type=Path, help="a checkout of other code to run side by side (table 1)"
    )
    args = parser.parse_args()
    only = {int(x) for x in args.only.split(",")}
    with tempfile.TemporaryDirectory(prefix="default-path-") as tmp:
        if 1 in only:
            slope_table(Path(tmp) / "slope", args.reps, args.small, args.large, args.baseline)
        if 2 in only:
            flat_table(
                Path(tmp) / "flat", args.long, args.baseline, args.reps if 1 not in only else 1
            )
        if 3 in only:
            build_table(args.nodes, args.reps)
        if 4 in only:
            custody_table(Path(tmp) / "custody", args.long, args.baseline, args.reps)
        if 5 in only:
            from _step_breakdown import parts_table, wal_table

            parts_table(200)
            wal_table(200)


if __name__ == "__main__":
    main()
