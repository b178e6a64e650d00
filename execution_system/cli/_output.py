"""How every command prints: one JSON document with ``--json``, plain lines otherwise."""

from __future__ import annotations

import json
import sys
from typing import Any

from contracts import ExecsysError, exit_status


def emit_json(value: Any) -> None:
    """Print one JSON document on stdout."""
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=False) + "\n")


def emit(text: str) -> None:
    """Print human-readable text on stdout."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def report_error(exc: ExecsysError, as_json: bool) -> int:
    """Print ``exc`` as one line on stderr (and as JSON on stdout with ``--json``)."""
    if as_json:
        emit_json({"error": exc.to_json()})
    sys.stderr.write(f"execsys: {exc.one_line()}\n")
    return exit_status(exc.code)
