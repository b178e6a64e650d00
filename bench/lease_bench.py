"""Lease expiry: how fast a hung runner's delivery is taken over and its late writes fenced.

Each round starts ``execsys run`` with ``--lease-ttl TTL`` on a step whose
executor works until released, SIGSTOPs the runner (at a moment it holds no
store transaction), lets a rival take the lease once it expires and
``execsys stop`` record the stop, then SIGCONTs
the first runner and waits for its ``LEASE_FENCED`` line. Figures per round:

* takeover after expiry: from the frozen runner's lease expiry (its last
  renewal + TTL, read from its row) to the grant of a rival that was
  already waiting for the lease (then released, so that ``execsys stop``
  takes the delivery over and records the stop);
* fenced after resume: from SIGCONT to the frozen runner's ``LEASE_FENCED`` line;
* exit after resume: from SIGCONT to that runner's exit.

Run: ``.venv/bin/python bench/lease_bench.py [--rounds N] [--ttl S]``. Prints a table;
asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from host._lease import LeaseManager, holder_name  # noqa: E402
from host.storage.sqlite import SqliteStorage as Store  # noqa: E402
from host.storage.sqlite import connect  # noqa: E402
from tests.host import test_lease_expiry as scenes  # noqa: E402


def one_round(ttl: str) -> tuple[float, float, float]:
    """(takeover after expiry, fenced after resume, exit after resume), in seconds."""
    tmp = Path(tempfile.mkdtemp(prefix="lease-bench-"))
    scene = scenes.Scene(tmp)
    runner, delivery = scene.start_held_run(ttl)
    scenes.freeze(runner, tmp / "state.db")
    # A rival already waiting for the lease: how soon after the expiry is it granted?
    store = Store(connect(tmp / "state.db"))
    rival = LeaseManager(store, tmp / "locks", holder_name("bench"), float(ttl))
    expires = float(rival.state(delivery)["expires"])
    assert expires > time.time(), "the lease expired before the rival started waiting"
    rival.acquire(delivery, wait_s=60)
    taken = time.time()
    rival.close()
    store.conn.close()
    stopped = scene.execsys("stop", delivery, "--lease-ttl", ttl, "--wait", "60", "--json")
    assert json.loads(stopped.stdout)["status"] == "stopped", stopped.stderr
    scene.hold.unlink()
    resumed = time.monotonic()
    runner.send_signal(signal.SIGCONT)
    assert runner.stderr is not None
    line = runner.stderr.readline()
    fenced = time.monotonic()
    runner.communicate(timeout=120)
    exited = time.monotonic()
    assert "LEASE_FENCED" in line, line
    return taken - expires, fenced - resumed, exited - resumed


def main() -> None:
    """Run the rounds and print the figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ttl", default="1")
    args = parser.parse_args()
    rows = [one_round(args.ttl) for _ in range(args.rounds)]
    print(f"lease TTL {args.ttl} s, {args.rounds} rounds (seconds: median, min, max)")
    names = ("takeover after expiry", "fenced after resume", "exit after resume")
    for name, values in zip(names, zip(*rows, strict=True), strict=True):
        print(
            f"  {name:<22} {statistics.median(values):6.3f} {min(values):6.3f} {max(values):6.3f}"
        )


if __name__ == "__main__":
    main()
