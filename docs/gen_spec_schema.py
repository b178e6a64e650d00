"""Generate ``docs/spec.schema.json``: the JSON Schema of a control-graph spec.

It is derived from ``contracts.ControlGraph`` (the pydantic models admission
parses with), so it describes the *shape* of a spec: keys, types, patterns and
ranges. The semantic rules (successors declared, routes covering their enum,
dataflow, cycles, ...) are admission's and are listed in ``docs/spec.md``.

Run: ``.venv/bin/python docs/gen_spec_schema.py`` (``--check`` exits 1 if the file is stale).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from contracts import ControlGraph

OUT = Path(__file__).with_name("spec.schema.json")


def _close_patterned_maps(node: Any) -> None:
    # pydantic renders ``dict[<pattern str>, X]`` as patternProperties alone, which
    # lets keys that miss the pattern through; the models refuse them, so must this.
    if isinstance(node, dict):
        if "patternProperties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            _close_patterned_maps(value)
    elif isinstance(node, list):
        for value in node:
            _close_patterned_maps(value)


def schema() -> dict[str, Any]:
    """The JSON Schema of the spec, with a dialect and an id."""
    generated = ControlGraph.model_json_schema(mode="validation")
    _close_patterned_maps(generated)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://execution-system.invalid/spec/v1.schema.json",
        **generated,
    }


def render() -> str:
    """The file's full text (stable key order, trailing newline)."""
    return json.dumps(schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> int:
    """Write the file (or, with ``--check``, compare it)."""
    text = render()
    if "--check" in sys.argv[1:]:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        return 0 if current == text else 1
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
