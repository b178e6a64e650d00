"""Command executor for stop tests: records its pid, then works for SLOW_S seconds."""

import json
import os
import sys
import time

request = json.load(sys.stdin)
with open(os.environ["EXECSYS_TEST_PIDS"], "a") as pids:
    pids.write(f"{os.getpid()}\n")
time.sleep(float(os.environ.get("SLOW_S", "30")))
print(json.dumps({"status": "completed", "output": {"ok": True}}))
