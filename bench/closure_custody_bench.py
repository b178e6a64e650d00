"""Custody alone on the closure bench's 10,000-file project: ``open``, then validates.

Generates the same project as ``bench/closure_bench.py --files N`` (without
the demo's two files), opens a delivery from it with ``FileCustody``, then
issues a ``read`` capability and validates the unchanged workspace
``--validates`` times, printing wall and CPU time (user+sys of this process)
of each and their medians. A generation of a CodeClosure goal makes three
such validates.

Run: ``.venv/bin/python bench/closure_custody_bench.py [--files N] [--validates N]
[--root DIR]`` (``--root``: import the code from another tree, e.g. a
``git archive`` of a base commit, for a side-by-side run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _cpu() -> float:
    spent = os.times()
    return spent.user + spent.system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--validates", type=int, default=10)
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    args = parser.parse_args()
    sys.path.insert(0, args.root)
    from contracts import CustodyPreview, DeliveryId, Digest, ExecutionSite
    from execution_system.custody import FileCustody

    with tempfile.TemporaryDirectory(prefix="closure-custody-") as tmp:
        project = Path(tmp) / "project"
        for i in range(args.files):
            folder = project / "src" / "filler" / f"d{i // 100:03d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"m{i:05d}.py").write_text(f"VALUE_{i} = {i}\n" * 8)
        custody = FileCustody(Path(tmp) / "custody")
        delivery = DeliveryId("bench")
        started, before = time.perf_counter(), os.times()
        custody.open(delivery, seed=str(project))
        after = os.times()
        print(
            f"open: {time.perf_counter() - started:.2f} s wall, "
            f"{after.user - before.user:.2f} s user, {after.system - before.system:.2f} s system"
        )
        time.sleep(0.1)  # out of the stat cache's racy window
        rows = []
        for n in range(args.validates):
            site = ExecutionSite.model_validate(
                {
                    "delivery": delivery,
                    "node": "N",
                    "activation": 1,
                    "invocation": f"i{n}",
                    "attempt": 1,
                }
            )
            cap = custody.issue(site, "read", ())
            preview = CustodyPreview(
                site=site, capability=cap.token, update_digest=Digest("sha256:" + "0" * 64)
            )
            started, cpu = time.perf_counter(), _cpu()
            verdict = custody.validate(preview)
            rows.append((time.perf_counter() - started, _cpu() - cpu))
            assert verdict.accepted, verdict
        print("validate wall/CPU s:", " ".join(f"{a:.3f}/{b:.3f}" for a, b in rows))
        print(
            f"median validate: {statistics.median(a for a, _ in rows):.3f} s wall, "
            f"{statistics.median(b for _, b in rows):.3f} s CPU; "
            f"three per generation: {3 * statistics.median(a for a, _ in rows):.2f} s"
        )


if __name__ == "__main__":
    main()
