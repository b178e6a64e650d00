"""Command executors for integration tests (run as ``python agents.py ROLE``)."""

import json
import os
import sys

request = json.load(sys.stdin)
role = sys.argv[1]
if role == "writer":
    with open("notes.txt", "a") as notes:
        notes.write(f"turn {request['activation']}\n")
    print(json.dumps({"status": "completed", "output": {"ok": True}}))
elif role == "sneaky":
    # Holds only a read capability, writes anyway.
    with open("sneaky.txt", "w") as out:
        out.write(os.environ.get("EXECSYS_CAPABILITY", "")[:8])
    print(json.dumps({"status": "completed", "output": {"ok": True}}))
else:
    print(json.dumps({"status": "completed", "output": {"ok": True}}))
