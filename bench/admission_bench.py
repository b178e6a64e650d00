"""Admission cost against graph size.

Generates control graphs of 250 / 500 / 1,000 / 2,000 nodes built from blocks
of a planner, a selected parallel region with uneven branches, a barrier, a
reader and a loop node with max_visits (so chains, regions, loops and reads
all grow with the size), and times, as the median of several runs:

* ``json.loads``  -- raw baseline: the stdlib JSON parser on the same document;
* ``yaml load``   -- ``parse_document`` of the YAML text (the strict loader);
* ``admission``   -- ``parse_graph`` + ``check_graph`` of the loaded document;
* ``1st adm.``    -- the first admission of that document in this process (one
  run, not a median): what ``execsys graph check`` pays, schema cache cold.

Each size runs three ways: nodes declared in flow order; in reverse order (the
worst case for an iterative dataflow analysis that sweeps in declaration
order); and with every port schema distinct (``unique``: the metaschema check
of each schema is cached by content, so this shows the uncached cost).
Per-node time should stay roughly flat as the size doubles.

Run: ``.venv/bin/python bench/admission_bench.py [--repeat N]``. No assertions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import yaml

from execution_system import check_graph, parse_document, parse_graph

SIZES = (250, 500, 1_000, 2_000)
#: (label, nodes declared in reverse, every port schema distinct)
VARIANTS = (("flow", False, False), ("reverse", True, False), ("unique", False, True))
OPERATIONS = frozenset({"echo", "all-true", "any-true", "count-present"})


def _block(i: int, nodes: dict[str, Any], previous: str | None, head_next: str) -> str:
    """Add one 10-node block; return its head. ``head_next`` is the block's exit."""
    b = f"b{i}"
    plan, par, bar, read, loop = f"{b}_plan", f"{b}_par", f"{b}_join", f"{b}_read", f"{b}_loop"
    lint, test, doc1, doc2, doc3 = f"{b}_lint", f"{b}_test", f"{b}_doc1", f"{b}_doc2", f"{b}_doc3"
    plan_inputs = {"prev": f"{previous}.ok"} if previous else {"ticket": "input.ticket"}
    nodes[plan] = {
        "kind": "action",
        "executor": "planner",
        "inputs": plan_inputs,
        "outputs": {"pick": {"type": "array", "items": {"enum": [lint, test, doc1]}}},
        "next": par,
    }
    nodes[par] = {
        "kind": "parallel",
        "branches": [lint, test, doc1],
        "select": f"{plan}.pick",
        "required": [test],
        "barrier": bar,
    }
    ok = {"ok": {"type": "boolean"}}
    nodes[lint] = {"kind": "action", "executor": "linter", "outputs": ok, "next": bar}
    nodes[test] = {
        "kind": "action",
        "executor": "tester",
        "outputs": ok,
        "retry": {"max_attempts": 3},
        "on_failure": "failed",
        "next": bar,
    }
    nodes[doc1] = {"kind": "action", "executor": "writer", "outputs": ok, "next": doc2}
    nodes[doc2] = {
        "kind": "operation",
        "operation": "echo",
        "inputs": {"ok": f"{doc1}.ok"},
        "outputs": ok,
        "next": doc3,
    }
    nodes[doc3] = {
        "kind": "action",
        "executor": "writer",
        "inputs": {"a": f"{doc1}.ok", "b": f"{doc2}.ok"},
        "next": bar,
    }
    nodes[bar] = {"kind": "barrier", "next": read}
    nodes[read] = {
        "kind": "operation",
        "operation": "all-true",
        "inputs": {"test": f"{test}.ok", "lint": f"{lint}.ok?", "doc": f"{doc2}.ok?"},
        "outputs": ok,
        "next": loop,
    }
    nodes[loop] = {
        "kind": "action",
        "executor": "reviewer",
        "inputs": {"ok": f"{read}.ok", "plan": f"{plan}.pick"},
        "outputs": {"ok": {"type": "boolean"}, "verdict": {"enum": ["again", "on"]}},
        "routes": {"port": "verdict", "cases": {"again": plan, "on": head_next}},
        "max_visits": 3,
    }
    return plan


def _unique_schemas(nodes: dict[str, Any], size: int) -> None:
    for nid, node in nodes.items():
        for port, schema in node.get("outputs", {}).items():
            node["outputs"][port] = {**schema, "description": f"{size}:{nid}.{port}"}


def make_graph(size: int, *, reverse: bool = False, unique: bool = False) -> dict[str, Any]:
    """A valid graph of exactly ``size`` nodes (blocks of 10, a chain tail, terminals).

    ``unique`` gives every port schema its own description, so no two schemas
    are equal (defeats the schema-check cache: the cold cost).
    """
    blocks = (size - 2) // 10
    tail = size - 2 - blocks * 10
    nodes: dict[str, Any] = {}
    previous: str | None = None
    heads: list[str] = []
    for i in range(blocks):
        heads.append(_block(i, nodes, previous, "PENDING"))
        previous = f"b{i}_loop"
    chain = [f"t{i}" for i in range(tail)]
    for i, nid in enumerate(chain):
        nodes[nid] = {
            "kind": "action",
            "executor": "worker",
            "inputs": {"prev": f"{previous}.ok"} if previous else {},
            "outputs": {"ok": {"type": "boolean"}},
            "next": chain[i + 1] if i + 1 < len(chain) else "done",
        }
        previous = nid
    exits = [*heads[1:], chain[0] if chain else "done"]
    for i, target in enumerate(exits):
        nodes[f"b{i}_loop"]["routes"]["cases"]["on"] = target
    nodes["done"] = {"kind": "terminal", "outcome": "succeeded"}
    nodes["failed"] = {"kind": "terminal", "outcome": "failed"}
    assert len(nodes) == size, (len(nodes), size)
    if unique:
        _unique_schemas(nodes, size)
    order = list(reversed(nodes)) if reverse else list(nodes)
    return {
        "spec": "execution-system/v1",
        "graph": f"bench-{size}",
        "input": {
            "type": "object",
            "properties": {"ticket": {"type": "string"}},
            "required": ["ticket"],
        },
        "start": heads[0] if heads else (chain[0] if chain else "done"),
        "nodes": {nid: nodes[nid] for nid in order},
    }


def median_seconds(action: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``repeat`` runs of ``action`` (after one warm-up run)."""
    action()
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        action()
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def _admit(document: Any) -> None:
    check_graph(parse_graph(document), OPERATIONS)


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement")
    args = parser.parse_args()
    header = (
        f"{'nodes':>6} {'order':>8} {'KiB':>6} | {'json.loads':>10} {'yaml load':>10} "
        f"{'admission':>10} {'1st adm.':>9} | {'json/node':>9} {'yaml/node':>9} "
        f"{'adm/node':>9} {'1st/node':>9}"
    )
    print(f"median of {args.repeat} runs; times in ms, per-node in microseconds")
    print(header)
    print("-" * len(header))
    for size in SIZES:
        for label, reverse, unique in VARIANTS:
            as_json = json.dumps(make_graph(size, reverse=reverse, unique=unique))
            # Dumped from fresh objects: shared ones would be written as (refused) aliases.
            as_yaml = yaml.safe_dump(json.loads(as_json), sort_keys=False).encode()
            loaded = parse_document(as_yaml, name="bench.yaml")
            began = time.perf_counter()
            _admit(loaded)  # must admit, or the timing means nothing
            cold = time.perf_counter() - began
            raw = median_seconds(lambda text=as_json: json.loads(text), args.repeat)
            load = median_seconds(
                lambda data=as_yaml: parse_document(data, name="bench.yaml"), args.repeat
            )
            admission = median_seconds(lambda doc=loaded: _admit(doc), args.repeat)
            print(
                f"{size:>6} {label:>8} {len(as_yaml) // 1024:>6} | "
                f"{raw * 1e3:>10.2f} {load * 1e3:>10.1f} {admission * 1e3:>10.1f} "
                f"{cold * 1e3:>9.1f} | {raw / size * 1e6:>9.2f} {load / size * 1e6:>9.1f} "
                f"{admission / size * 1e6:>9.1f} {cold / size * 1e6:>9.1f}"
            )


if __name__ == "__main__":
    main()
