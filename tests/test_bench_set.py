"""``make bench`` runs every benchmark script in bench/ (a new one must be listed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_every_bench_script_is_in_make_bench() -> None:
    spec = importlib.util.spec_from_file_location("run_all", BENCH / "run_all.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    scripts = {path.name.removesuffix("_bench.py") for path in BENCH.glob("*_bench.py")}
    assert scripts == set(module.BENCHES)
