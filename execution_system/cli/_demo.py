"""``execsys demo``: the product's main job on the embedded default, explained."""

from __future__ import annotations

import argparse
from importlib import resources

from execution_system.cli._output import emit


def run_demo(args: argparse.Namespace) -> int:
    """Admit the bundled example spec and show its graph."""
    from contracts import graph_digest
    from execution_system import load_graph
    from execution_system._render import to_mermaid
    from host import OPERATIONS

    spec = resources.files("execution_system") / "examples" / "triage-review.yaml"
    with resources.as_file(spec) as path:
        graph = load_graph(path, operations=frozenset(OPERATIONS))
    emit(f"Admitted graph '{graph.graph}' ({len(graph.nodes)} nodes, {graph_digest(graph)}).")
    emit("Its topology (Mermaid):")
    emit(to_mermaid(graph))
    return 0
