"""A fleet test executor that writes to its workspace and reports what it found there.

Each turn appends its node to ``notes.txt`` in the workspace and a large file
``blob-NODE.bin``, and logs "NODE saw LINES" to $EXECSYS_TEST_LOG: a runner on
another machine that did not bring the workspace over would see fewer lines.
"""

import json
import os
import sys
from pathlib import Path

request = json.load(sys.stdin)
workspace = Path(os.environ["EXECSYS_WORKSPACE"])
notes = workspace / "notes.txt"
seen = notes.read_text().split() if notes.exists() else []
with notes.open("a") as out:
    out.write(request["node"] + "\n")
(workspace / f"blob-{request['node']}.bin").write_bytes(os.urandom(300_000))
with open(os.environ["EXECSYS_TEST_LOG"], "a") as log:
    log.write(f"{request['node']} saw {','.join(seen) or '-'}\n")
print(json.dumps({"status": "completed", "output": {"v": len(seen)}}))
