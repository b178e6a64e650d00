"""Command executors of the crash suite: a planner that asks, and branch workers.

Each turn appends "node activation attempt turn" to $EXECSYS_TEST_LOG, so a
test can count how many times every turn really ran.
"""

import json
import os
import sys

request = json.load(sys.stdin)
role = sys.argv[1]
with open(os.environ["EXECSYS_TEST_LOG"], "a") as log:
    log.write(f"{request['node']} {request['activation']} {request['attempt']} {request['turn']}\n")
if role == "planner":
    if request["turn"] == 1:
        reply = {"status": "needs-input", "question": "which checks?", "session": "s1"}
    else:
        reply = {"status": "completed", "output": {"checks": request["response"]}}
elif request["node"] == "a" and request["attempt"] == 1:
    reply = {"status": "failed", "reason": "flaky", "retryable": True}
else:
    reply = {"status": "completed", "output": {"v": len(request["node"]) + request["attempt"]}}
print(json.dumps(reply))
