"""A fleet test executor whose ``long`` turn writes to its workspace, then waits.

Each turn logs "NODE ATTEMPT TURN clean|dirty PID" to $EXECSYS_TEST_LOG: ``dirty``
when the workspace still holds the file an earlier, ended turn of ``long`` wrote
(so a test sees whether an ended turn's workspace was restored). The ``long``
turn writes that file and then waits, up to ten minutes, for the file
$EXECSYS_TEST_RELEASE, so only an ended turn ends early.
"""

import json
import os
import sys
import time
from pathlib import Path

request = json.load(sys.stdin)
workspace = Path(os.environ["EXECSYS_WORKSPACE"])
partial = workspace / "partial.txt"
state = "dirty" if partial.exists() else "clean"
with open(os.environ["EXECSYS_TEST_LOG"], "a") as log:
    log.write(f"{request['node']} {request['attempt']} {request['turn']} {state} {os.getpid()}\n")
if request["node"] == "long":
    partial.write_text("written by a turn that had not finished\n")
    release = os.environ["EXECSYS_TEST_RELEASE"]
    deadline = time.monotonic() + 600
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
print(json.dumps({"status": "completed", "output": {"v": 1}}))
