"""Run every benchmark, one after another, each in its own process (``make bench``).

Each script prints its own tables (Host next to raw LangGraph or a peer, same
run); this only runs them in turn and says which failed to run. By default each
runs at a reduced size so the whole set finishes in well under an hour on two
cores; ``--full`` runs each at the sizes ``docs/performance.md`` quotes.
Scripts that need a service are run only when it is configured:
``fleet_bench.py`` with ``EXECSYS_BENCH_POSTGRES`` (a database URL it may fill)
and ``web_bench.py`` with a Chromium on ``PATH``.

Usage: ``.venv/bin/python bench/run_all.py [--full] [--only NAME,...]``.
Prints tables; asserts nothing. Exits 1 if a script could not run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# name -> (arguments at the reduced size, arguments at full size)
BENCHES: dict[str, tuple[list[str], list[str]]] = {
    "host": (["--quick"], []),
    "default_path": (["--reps", "2"], []),
    "ops": (["--quick"], []),
    "admission": (["--repeat", "2"], []),
    "journal": (["50000", "--reps", "3"], []),
    "custody": (["--files", "2000", "--mb", "20"], []),
    "closure": (["--runs", "1"], ["--files", "10000"]),
    "closure_custody": (["--files", "2000", "--validates", "3"], []),
    "chain_step": (["--nodes", "300"], []),
    "lease": (["--rounds", "2"], []),
    "scale": (["--deliveries", "1000", "--reps", "2", "--chains", "250,500"], []),
    "fleet": (["--fleet-deliveries", "10", "--deliveries", "10", "--rounds", "1"], []),
    "archive": (["--files", "500,2000"], []),
    "web": (["--deliveries", "1000", "--reps", "20"], []),
}


def _skip_reason(name: str) -> str:
    if name in ("fleet", "archive") and not os.environ.get("EXECSYS_BENCH_POSTGRES"):
        return "EXECSYS_BENCH_POSTGRES is not set"
    if name == "web" and not (shutil.which("chromium") or shutil.which("chromium-browser")):
        return "no chromium on PATH"
    return ""


def _argv(name: str, full: bool) -> list[str]:
    quick, complete = BENCHES[name]
    argv = [sys.executable, str(HERE / f"{name}_bench.py"), *(complete if full else quick)]
    if name in ("fleet", "archive"):
        argv += ["--store", os.environ["EXECSYS_BENCH_POSTGRES"]]
    return argv


def main() -> int:
    """Run the selected benchmarks; 1 if any of them failed to run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the sizes the docs quote")
    parser.add_argument("--only", help="comma-separated names: " + ",".join(BENCHES))
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    failed: list[str] = []
    summary: list[tuple[str, str]] = []
    for name in names:
        reason = _skip_reason(name)
        if reason:
            summary.append((name, f"skipped: {reason}"))
            continue
        print(f"\n===== {name}_bench.py =====", flush=True)
        started = time.perf_counter()
        done = subprocess.run(_argv(name, args.full), check=False)
        took = time.perf_counter() - started
        if done.returncode != 0:
            failed.append(name)
        summary.append((name, f"exit {done.returncode} in {took:.0f} s"))
    print("\n===== summary =====")
    for name, outcome in summary:
        print(f"{name:<14} {outcome}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
