"""Command executor for lease tests: works until the test lets it finish.

Every turn appends one line to $EXECSYS_TEST_LOG. While the file named by
$EXECSYS_TEST_HOLD exists, the turn records its pid in $EXECSYS_TEST_PIDS and
waits (at most two minutes), so a test decides when a step ends without
guessing how long anything takes.
"""

import json
import os
import sys
import time

request = json.load(sys.stdin)
with open(os.environ["EXECSYS_TEST_LOG"], "a") as log:
    log.write(f"{request['node']} {request['activation']} {request['attempt']} {request['turn']}\n")
hold = os.environ["EXECSYS_TEST_HOLD"]
if os.path.exists(hold):
    with open(os.environ["EXECSYS_TEST_PIDS"], "a") as pids:
        pids.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + 120
    while os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.05)
print(json.dumps({"status": "completed", "output": {"ok": True}}))
