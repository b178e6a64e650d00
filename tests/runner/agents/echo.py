"""Command executor that completes with everything it was given, for inspection.

The output carries the request read from stdin verbatim, its argv, its cwd and
the protocol environment variables.
"""

import json
import os
import sys

raw = sys.stdin.read()
print(
    json.dumps(
        {
            "status": "completed",
            "output": {
                "raw": raw,
                "request": json.loads(raw),
                "argv": sys.argv[1:],
                "cwd": os.getcwd(),
                "capability": os.environ.get("EXECSYS_CAPABILITY"),
                "workspace": os.environ.get("EXECSYS_WORKSPACE"),
                "extra": os.environ.get("EXECSYS_TEST_EXTRA"),
            },
        }
    )
)
