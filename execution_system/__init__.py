"""execution-system: admission, custody, CodeClosure and the ``execsys`` CLI."""

from execution_system._admission import (
    admit,
    check_graph,
    load_graph,
    parse_authority,
    parse_graph,
)
from execution_system._loading import MAX_DEPTH, MAX_DOCUMENT_BYTES, load_document, parse_document

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
