"""A fleet test executor: logs every turn it runs; ``slow`` steps wait for a release file.

An ``ask`` node asks a question on its first turn and completes on the answer's turn
(its output ``v`` is the answer's length).

Each turn appends "DELIVERY NODE ACTIVATION ATTEMPT TURN" to $EXECSYS_TEST_LOG, so a
test counts how many times each turn really ran. A ``slow`` node waits (up to a
minute) until the file $EXECSYS_TEST_RELEASE exists, so a test can kill the runner
while the step is in flight.
"""

import json
import os
import sys
import time

request = json.load(sys.stdin)
with open(os.environ["EXECSYS_TEST_LOG"], "a") as log:
    log.write(
        f"{request['delivery']} {request['node']} {request['activation']} "
        f"{request['attempt']} {request['turn']}\n"
    )
if request["node"] == "slow":
    release = os.environ.get("EXECSYS_TEST_RELEASE", "")
    deadline = time.monotonic() + 60
    while release and not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
if request["node"] == "ask" and request["turn"] == 1:
    print(json.dumps({"status": "needs-input", "question": "how many?", "session": "s"}))
    sys.exit(0)
if request["node"] == "ask":
    print(json.dumps({"status": "completed", "output": {"v": len(str(request["response"]))}}))
    sys.exit(0)
print(json.dumps({"status": "completed", "output": {"v": len(request["node"])}}))
