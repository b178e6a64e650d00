"""``execsys`` under cProfile timed by process CPU time: ``_profiled_serve.py OUT ARGS...``.

The fleet bench runs one runner through this to see where a ``serve`` process spends
its CPU (not its waits: a CPU-time profile leaves out time blocked on the database).
"""

from __future__ import annotations

import cProfile
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from execution_system.cli._main import main

out = sys.argv[1]
profile = cProfile.Profile(time.process_time)
try:
    code = profile.runcall(main, sys.argv[2:])
finally:
    profile.dump_stats(out)
sys.exit(code)
