"""The per-step table of ``fleet_bench.py``: a step's marginal cost apart from fixed costs.

A row of the main table divides a whole delivery's time by its steps, so the
work done once per delivery (raw LangGraph: its input checkpoint and the start
super-step; the Host: admission, the first lease grant, the input checkpoint and
start step, the terminal node, the release and the closing status read) is
spread over its ten steps. This table separates the two as ``bench/`` does for
the default path (issue 15's slope): each side runs deliveries of ``short`` and
``long`` steps in alternating rounds, and

* marginal ms/step = (ms per delivery at ``long`` - at ``short``) / (``long`` - ``short``),
* fixed ms/delivery = ms per delivery at ``short`` - ``short`` x marginal.

Medians over the rounds; CPU the same way from ``time.process_time``.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Side = Callable[[int, int], dict[str, Any]]


def marginal_rows(
    url: str, folder: Path, deliveries: int, short: int, long: int, rounds: int
) -> list[dict[str, Any]]:
    """One row per side (raw LangGraph, the Host): per-delivery and marginal per-step costs."""
    from bench.fleet_bench import run_host, run_raw

    def raw(count: int, steps: int) -> dict[str, Any]:
        return asyncio.run(run_raw(url, count, steps, f"m{time.time_ns()}"))

    def host(count: int, steps: int) -> dict[str, Any]:
        return run_host(url, count, steps, folder)

    sides: dict[str, Side] = {"raw-langgraph": raw, "host": host}
    got: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for _ in range(rounds):
        for steps in (short, long):
            for name, side in sides.items():
                side(2, steps)  # warm-up: this length's graph compiled, caches filled
                measured = side(deliveries, steps)
                wall = measured["ms/step"] * steps
                got.setdefault((name, steps), []).append((wall, wall * measured["cpu %"] / 100))
    rows = []
    for name in sides:
        at = {
            n: [statistics.median(x[i] for x in got[(name, n)]) for i in (0, 1)]
            for n in (short, long)
        }
        step_ms = (at[long][0] - at[short][0]) / (long - short)
        step_cpu = (at[long][1] - at[short][1]) / (long - short)
        rows.append(
            {
                "system": name,
                f"ms/deliv {short}": at[short][0],
                f"ms/deliv {long}": at[long][0],
                "ms/step": step_ms,
                "CPU ms/step": step_cpu,
                "fixed ms/deliv": at[short][0] - short * step_ms,
            }
        )
    return rows


def print_marginal(rows: list[dict[str, Any]], deliveries: int, rounds: int) -> None:
    """The table and the ratios the issue's per-step target reads."""
    from bench.fleet_bench import _table

    by = {r["system"]: r for r in rows}
    lengths = [k.split()[-1] for k in rows[0] if k.startswith("ms/deliv")]
    print(
        f"marginal cost of a step: deliveries of {lengths[0]} and {lengths[1]} steps, "
        f"{deliveries} each, {rounds} alternating rounds (medians)"
    )
    _table(rows)
    host, raw = by["host"], by["raw-langgraph"]
    print(
        f"host marginal per-step cost / raw LangGraph: {host['ms/step'] / raw['ms/step']:.2f}x "
        f"(target <= 1.3x); CPU {host['CPU ms/step'] / raw['CPU ms/step']:.2f}x"
    )
    print(
        f"fixed cost per delivery: host {host['fixed ms/deliv']:.2f} ms, "
        f"raw {raw['fixed ms/deliv']:.2f} ms"
    )
