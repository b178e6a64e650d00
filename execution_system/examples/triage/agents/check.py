"""Command executor of the triage example: one check, speaking the executor protocol.

Reads the request on stdin, prints one JSON reply on stdout. The 'tests' check
is flaky on the first attempt of each activation, to show the retry policy.
"""

import json
import sys

request = json.load(sys.stdin)
check = sys.argv[1]
if check == "tests" and request["attempt"] == 1:
    print(json.dumps({"status": "failed", "reason": "flaky-runner", "retryable": True}))
else:
    print(json.dumps({"status": "completed", "output": {"ok": True}}))
