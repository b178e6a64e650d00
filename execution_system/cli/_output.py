"""How every command prints: one JSON document with ``--json``, plain lines otherwise."""

from __future__ import annotations

import json
import sys
from typing import Any

from contracts import ExecsysError, exit_status


def emit_json(value: Any) -> None:
    """Print one JSON document on stdout."""
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=False) + "\n")


#: Characters that reorder text (Trojan Source) or break lines outside C0/C1.
_FORMAT = frozenset(
    "\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    r"""``text`` with every control character escaped, so it stays on its own line.

    Executor reasons and questions, operator actors and reasons, node ids read
    from a store: text printed to a terminal may come from anyone, and raw ESC,
    NUL, CR or newlines would let it forge lines or recolour the screen. C0 and
    C1 controls, DEL, line separators and bidirectional overrides become
    visible escapes (``\x1b``, ``\n``, ``\u202e``). The journal and
    ``--json`` keep the exact text.
    """
    if text.isprintable():
        return text  # the common case, and cheap
    return "".join(
        _escaped(c) if c in _FORMAT or ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F else c for c in text
    )


def emit(text: str) -> None:
    """Print one line of human-readable text on stdout, control characters escaped."""
    sys.stdout.write(terminal_safe(text.removesuffix("\n")) + "\n")


def emit_lines(text: str) -> None:
    """Print several lines (text this program generated), each through :func:`emit`."""
    for line in text.splitlines():
        emit(line)


def report_error(exc: ExecsysError, as_json: bool) -> int:
    """Print ``exc`` as one line on stderr (and as JSON on stdout with ``--json``)."""
    if as_json:
        emit_json({"error": exc.to_json()})
    sys.stderr.write(f"execsys: {terminal_safe(exc.one_line())}\n")
    return exit_status(exc.code)
