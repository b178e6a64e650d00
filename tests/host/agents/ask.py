"""Command executor for race and crash tests: asks one question, then completes.

Every turn appends one line to $EXECSYS_TEST_LOG, so a test can count how many
times each turn really ran.
"""

import json
import os
import sys

request = json.load(sys.stdin)
with open(os.environ["EXECSYS_TEST_LOG"], "a") as log:
    log.write(f"{request['node']} {request['activation']} {request['attempt']} {request['turn']}\n")
if request["turn"] == 1:
    print(
        json.dumps(
            {
                "status": "needs-input",
                "question": {"ask": "which way?"},
                "session": "s-" + request["invocation"],
            }
        )
    )
else:
    assert request["session"] == "s-" + request["invocation"], "same episode, same session"
    print(json.dumps({"status": "completed", "output": {"answer": request["response"]}}))
