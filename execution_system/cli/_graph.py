"""``execsys graph check`` and ``execsys graph show``."""

from __future__ import annotations

import argparse
from typing import Any

from execution_system.cli._output import emit, emit_json, emit_lines


def register(commands: Any) -> None:
    """Add the ``graph`` command group."""
    graph = commands.add_parser("graph", help="check or show a control-graph spec")
    sub = graph.add_subparsers(dest="graph_command", metavar="SUBCOMMAND")
    sub.required = True

    check = sub.add_parser("check", help="admit a spec, or print its first error")
    check.add_argument("spec", metavar="SPEC", help="spec file (YAML or JSON)")
    check.add_argument("--json", action="store_true", help="print a JSON document")
    check.set_defaults(handler=_check)

    show = sub.add_parser("show", help="print a spec's graph as Mermaid or JSON")
    show.add_argument("spec", metavar="SPEC", help="spec file (YAML or JSON)")
    show.add_argument(
        "--format", choices=["mermaid", "json"], default="mermaid", help="output format"
    )
    show.set_defaults(handler=_show)


def _load(path: str) -> Any:
    from execution_system import load_graph
    from host import OPERATIONS

    return load_graph(path, operations=frozenset(OPERATIONS))


def _check(args: argparse.Namespace) -> int:
    from contracts import graph_digest

    graph = _load(args.spec)
    digest = graph_digest(graph)
    if args.json:
        emit_json({"ok": True, "graph": graph.graph, "nodes": len(graph.nodes), "digest": digest})
    else:
        emit(f"ok: graph '{graph.graph}' admitted ({len(graph.nodes)} nodes, {digest})")
    return 0


def _show(args: argparse.Namespace) -> int:
    from execution_system._render import to_json, to_mermaid

    graph = _load(args.spec)
    if args.format == "json":
        emit_json(to_json(graph))
    else:
        emit_lines(to_mermaid(graph))
    return 0
