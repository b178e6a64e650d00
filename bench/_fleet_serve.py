"""The fleet rows of ``fleet_bench.py``: queued deliveries drained by N ``execsys serve`` processes.

Each round makes a folder (spec, executor binding, inputs) and submits the
deliveries in this process, through the same code as ``execsys submit``. The
queued rows are then held back (their status set aside) while the runners start,
so that process start-up is not measured; once every runner is listed as live
and one warm-up delivery per runner has completed (imports, the first graph
compile), the rows are queued again in one transaction, whose NOTIFY wakes
them all at once. The round ends when the last delivery is completed.

Measured from the store and ``/proc``:

* wall: from that release to the last completion's ``updated`` time;
* step commit latency: per delivery, the time from one step's commit to the
  next (the checkpoint rows' ``created``), so the executor's trivial turn and
  the whole step are in it;
* CPU: the runner processes' user + system time over the round, in percent of
  one core (this machine has ``os.cpu_count()`` cores).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

EXECSYS = str(Path(sys.executable).with_name("execsys"))
TICK = os.sysconf("SC_CLK_TCK")

STEP_PY = """
async def step(request):
    return {"status": "completed", "output": {"v": request.activation}}
"""


def _spec(steps: int) -> str:
    nodes = [
        f"  s{i}: {{kind: action, executor: worker, outputs: {{v: {{type: integer}}}}, "
        f"next: {f's{i + 1}' if i + 1 < steps else 'done'}}}"
        for i in range(steps)
    ]
    return (
        "spec: execution-system/v1\ngraph: fleet-bench\n"
        "input: {type: object, properties: {n: {type: integer}}, required: [n]}\n"
        "start: s0\nnodes:\n"
        + "\n".join(nodes)
        + "\n  done: {kind: terminal, outcome: succeeded}\n"
    )


def _prepare(folder: Path, steps: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench_step.py").write_text(STEP_PY)
    (folder / "execsys.yaml").write_text(
        f"executors:\n  worker: {{python: 'bench_step:step', path: '{folder}'}}\n"
    )
    (folder / "spec.yaml").write_text(_spec(steps))
    (folder / "in.json").write_text(json.dumps({"n": 1}))


def _submit(url: str, folder: Path, count: int) -> list[str]:
    """Queue ``count`` deliveries as ``execsys submit`` would; their ids."""
    import asyncio

    from execution_system._compose import open_runner
    from execution_system.cli._delivery import admitted_from_args
    from execution_system.cli._main import build_parser

    args = build_parser().parse_args(
        ["submit", str(folder / "spec.yaml"), "--input", str(folder / "in.json"), "--store", url]
    )
    runner = open_runner(url, folder)
    ids = []
    try:
        for _ in range(count):
            delivery, _dir = admitted_from_args(args)
            report = asyncio.run(runner.host.submit(delivery))
            assert report.status.value == "queued", report
            ids.append(str(report.delivery))
    finally:
        runner.close()
    return ids


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def _wait(check: Any, what: str, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"fleet bench: timed out waiting for {what}")
        time.sleep(0.05)


def fleet_round(
    url: str,
    folder: Path,
    processes: int,
    deliveries: int,
    steps: int,
    concurrency: int,
    profile: Path | None = None,
) -> dict[str, Any]:
    """One row: ``deliveries`` of ``steps`` steps drained by ``processes`` runners.

    With ``profile``, the first runner runs under a CPU-time cProfile that writes its stats there.
    """
    _prepare(folder, steps)
    cwd = Path.cwd()
    os.chdir(folder)  # custody's folders beside the store are the runners' (same cwd)
    try:
        ids = _submit(url, folder, deliveries)
        warm = _submit(url, folder, processes)
    finally:
        os.chdir(cwd)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE execsys_deliveries SET status = 'bench-held' WHERE delivery = ANY(%s)", (ids,)
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXECSYS_")}
        env["EXECSYS_STORE"] = url
        names = [f"bench-{processes}-{i}-{time.time_ns()}" for i in range(processes)]
        profiled = Path(__file__).with_name("_profiled_serve.py")
        wrap = [sys.executable, str(profiled), str(profile)] if profile else []
        runners = [
            subprocess.Popen(
                [
                    *(wrap if i == 0 and wrap else [EXECSYS]),
                    *("serve", "--name", name, "--concurrency", str(concurrency)),
                ],
                cwd=folder,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=(folder / f"{name}.err").open("w"),
            )
            for i, name in enumerate(names)
        ]
        try:

            def listed() -> bool:
                rows = conn.execute(
                    "SELECT count(*) FROM execsys_runners WHERE name = ANY(%s)", (names,)
                ).fetchone()
                return bool(rows and rows[0] == processes)

            _wait(listed, "the runners to start")

            def warmed() -> bool:
                rows = conn.execute(
                    "SELECT count(*) FROM execsys_deliveries WHERE delivery = ANY(%s) "
                    "AND status = 'completed'",
                    (warm,),
                ).fetchone()
                return bool(rows and rows[0] == len(warm))

            _wait(warmed, "the warm-up deliveries")
            cpu0 = sum(_cpu_s(r.pid) for r in runners)
            t0 = time.time()
            with conn.transaction():
                conn.execute(
                    "UPDATE execsys_deliveries SET status = 'queued' WHERE delivery = ANY(%s)",
                    (ids,),
                )
                for delivery in ids:
                    conn.execute("SELECT pg_notify('execsys_queue', %s)", (delivery,))

            def drained() -> bool:
                rows = conn.execute(
                    "SELECT count(*) FROM execsys_deliveries WHERE delivery = ANY(%s) "
                    "AND status <> 'completed' ",
                    (ids,),
                ).fetchone()
                return bool(rows and rows[0] == 0)

            _wait(drained, "the deliveries to complete")
            cpu = sum(_cpu_s(r.pid) for r in runners) - cpu0
            last = conn.execute(
                "SELECT max(updated) FROM execsys_deliveries WHERE delivery = ANY(%s)", (ids,)
            ).fetchone()
            wall = float(last[0]) - t0 if last else 0.0
            created = conn.execute(
                "SELECT delivery, created FROM execsys_checkpoints WHERE delivery = ANY(%s) "
                "ORDER BY delivery, created",
                (ids,),
            ).fetchall()
        finally:
            for r in runners:
                r.send_signal(signal.SIGTERM)
            for r in runners:
                r.wait(timeout=120)
    gaps: list[float] = []
    for (d1, c1), (d2, c2) in itertools.pairwise(created):
        if d1 == d2:
            gaps.append((c2 - c1) * 1000)
    gaps.sort()
    return {
        "system": f"serve x{processes}",
        "deliveries/s": deliveries / wall,
        "steps/s": deliveries * steps / wall,
        "ms/step": wall * 1000 / (deliveries * steps),
        "p50 commit ms": statistics.median(gaps) if gaps else 0.0,
        "p99 commit ms": gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))] if gaps else 0.0,
        "cpu %": 100 * cpu / wall,
    }
