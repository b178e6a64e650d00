"""A command executor that writes into its workspace, for crash tests.

Attempt 1 writes ``src/x.txt``, starts a child in a session of its own that
keeps appending to ``src/late.txt`` (an orphan in the making), records the pids
and its invocation id in $CRASH_DIR, signals readiness and then hangs until it
is killed. Later attempts, and attempt 1 run again once it has signalled
readiness (after a stop), write nothing and complete.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

request = json.load(sys.stdin)
control = Path(os.environ["CRASH_DIR"])
with open(control / "turns.log", "a") as log:
    log.write(f"{request['node']} {request['activation']} {request['attempt']} {request['turn']}\n")
if request["attempt"] == 1 and not (control / "ready").exists():
    Path("src").mkdir(exist_ok=True)
    Path("src/x.txt").write_text("written by the attempt that is killed\n")
    child = subprocess.Popen(
        ["/bin/sh", "-c", "while true; do echo late >> src/late.txt; sleep 0.05; done"],
        start_new_session=True,
    )
    (control / "pids").write_text(f"{os.getpid()}\n{child.pid}\n")
    (control / "invocation").write_text(request["invocation"])
    (control / "launcher").write_text(os.environ["EXECSYS_LAUNCHER"])
    (control / "ready").write_text("ready")
    time.sleep(1000)
print(json.dumps({"status": "completed", "output": {"ok": True}}))
