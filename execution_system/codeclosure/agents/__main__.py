"""Entry point: ``python -m execution_system.codeclosure.agents ROLE [ARG]``."""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from execution_system.codeclosure.agents._checkrun import die_with_parent
from execution_system.codeclosure.agents._roles import ROLES


def main() -> int:
    """Read one request, run the role, print one reply.

    The agent ends with the runner that started it (SIGTERM when its parent
    dies): a killed ``goal start`` leaves no check running on its own.
    """
    parent = os.getppid()
    die_with_parent(signal.SIGTERM)
    if os.getppid() != parent:  # the runner died before the request was armed
        return 1
    request: dict[str, Any] = json.load(sys.stdin)
    role = sys.argv[1] if len(sys.argv) > 1 else ""
    handler = ROLES.get(role)
    if handler is None:
        reply: dict[str, Any] = {"status": "failed", "reason": "unknown-role"}
    else:
        reply = handler(request, sys.argv[2:])
    sys.stdout.write(json.dumps(reply) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
