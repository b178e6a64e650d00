"""Before/after for ``journal_bench.py --before REV``: one measurement in two source trees.

The code of a git revision is unpacked with ``git archive`` into a temporary
folder; each tree then times ``verify_lines`` or ``audit_bundle`` on the same
bytes in its own child process, the trees alternating, best of three runs each.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from host.journal import audit_bundle, verify_lines
data = open(sys.argv[3], "rb").read()
if sys.argv[2] == "verify":
    lines = data.splitlines(keepends=True)
    run = lambda: verify_lines(lines)
else:
    run = lambda: audit_bundle(data)
walls, cpus = [], []
for _ in range(3):
    c0, w0 = time.process_time(), time.perf_counter()
    run()
    walls.append(time.perf_counter() - w0)
    cpus.append(time.process_time() - c0)
print(json.dumps([min(walls), min(cpus)]))
"""


def _tree(rev: str) -> Path:
    """A checkout of ``rev`` (``git archive``) in a temporary folder."""
    folder = Path(tempfile.mkdtemp(prefix="journal-bench-tree-"))
    root = Path(__file__).resolve().parents[1]
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", rev], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def _in_tree(tree: Path, what: str, data: bytes) -> tuple[float, float]:
    """``(wall, cpu)`` best of three of ``what`` (verify or audit) on ``data`` in ``tree``."""
    with tempfile.NamedTemporaryFile(suffix=".bin") as file:
        file.write(data)
        file.flush()
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(tree), what, file.name],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    wall, cpu = json.loads(out)
    return float(wall), float(cpu)


def before_after(what: str, data: bytes, rev: str, events: int, rounds: int = 3) -> None:
    """Time ``what`` on ``data`` in ``rev`` and in this tree, alternating child processes."""
    trees = {rev: _tree(rev), "this tree": Path(__file__).resolve().parents[1]}
    best: dict[str, list[float]] = {name: [1e9, 1e9] for name in trees}
    for _ in range(rounds):
        for name, tree in trees.items():
            wall, cpu = _in_tree(tree, what, data)
            best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
    for name, (wall, cpu) in best.items():
        label = f"  {what} in {name}"
        print(f"{label:<44}{events / wall:>14,.0f}{events / cpu:>14,.0f}")
