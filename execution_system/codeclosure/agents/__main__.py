"""Entry point: ``python -m execution_system.codeclosure.agents ROLE [ARG]``."""

from __future__ import annotations

import json
import sys
from typing import Any

from execution_system.codeclosure.agents._roles import ROLES


def main() -> int:
    """Read one request, run the role, print one reply."""
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
