"""Command executors of the crash suite: a planner that asks, and branch workers.

Each turn appends "node activation attempt turn" to $EXECSYS_TEST_LOG, so a
test can count how many times every turn really ran. ``edit`` (after the
barrier, with a write capability) writes ``out/edit-ATTEMPT.txt`` into its
workspace, so the committed savepoint tells which attempt's writes were kept. Outputs do not
depend on the attempt, so a delivery interrupted and continued ends with the
same output digests as one that was not.
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
    if request["node"] == "edit":
        os.makedirs("out", exist_ok=True)
        with open(f"out/edit-{request['attempt']}.txt", "w") as out:
            out.write("written by edit\n")
    reply = {"status": "completed", "output": {"v": len(request["node"])}}
print(json.dumps(reply))
