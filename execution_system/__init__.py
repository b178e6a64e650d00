"""execution-system: admission, custody, CodeClosure and the ``execsys`` CLI.

Names are loaded on first use (PEP 562): the CLI's reading commands import
this package but need none of admission's machinery, and start-up time is
part of their contract (see docs/performance.md).
"""

import typing as _typing

if _typing.TYPE_CHECKING:
    from execution_system._admission import (
        admit,
        check_graph,
        load_graph,
        parse_authority,
        parse_graph,
    )
    from execution_system._loading import (
        MAX_DEPTH,
        MAX_DOCUMENT_BYTES,
        load_document,
        parse_document,
    )

__all__ = [
    "MAX_DEPTH",
    "MAX_DOCUMENT_BYTES",
    "admit",
    "check_graph",
    "load_document",
    "load_graph",
    "parse_authority",
    "parse_document",
    "parse_graph",
]

_HOME = {
    "admit": "_admission",
    "check_graph": "_admission",
    "load_graph": "_admission",
    "parse_authority": "_admission",
    "parse_graph": "_admission",
    "MAX_DEPTH": "_loading",
    "MAX_DOCUMENT_BYTES": "_loading",
    "load_document": "_loading",
    "parse_document": "_loading",
}


def __getattr__(name: str) -> _typing.Any:
    if name in _HOME:
        import importlib

        return getattr(importlib.import_module(f"execution_system.{_HOME[name]}"), name)
    raise AttributeError(f"module 'execution_system' has no attribute {name!r}")
