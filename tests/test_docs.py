"""The published docs stay in step with the code they describe."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from jsonschema import Draft202012Validator

from contracts import ErrorCode, exit_status

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SPECS = ROOT / "tests" / "fixtures" / "specs"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_{name}", DOCS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _catalogue_rows() -> dict[str, int]:
    text = (DOCS / "errors.md").read_text(encoding="utf-8")
    return {
        code: int(status)
        for code, status in re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \| ([12]) \|", text, re.M)
    }


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda c: c.value)
def test_every_code_is_in_the_catalogue_with_its_exit_status(code: ErrorCode) -> None:
    rows = _catalogue_rows()
    assert code.value in rows, f"{code.value} is not in docs/errors.md (run docs/gen_errors.py)"
    assert rows[code.value] == exit_status(code)


def test_the_catalogue_lists_no_unknown_code() -> None:
    assert set(_catalogue_rows()) <= {code.value for code in ErrorCode}


def test_the_catalogue_is_what_the_generator_writes() -> None:
    generated = _script("gen_errors").render()
    assert (DOCS / "errors.md").read_text(encoding="utf-8") == generated


def test_the_published_spec_schema_is_fresh() -> None:
    generated = _script("gen_spec_schema").render()
    assert (DOCS / "spec.schema.json").read_text(encoding="utf-8") == generated


def test_the_published_spec_schema_accepts_valid_specs_and_refuses_bad_shapes() -> None:
    validator = Draft202012Validator(json.loads((DOCS / "spec.schema.json").read_text()))
    for path in sorted((SPECS / "valid").iterdir()):
        assert validator.is_valid(yaml.safe_load(path.read_text())), path.name
    for name in ("unknown-key-top", "unknown-key-node", "missing-key-top", "invalid-node-id"):
        document = yaml.safe_load((SPECS / "invalid" / f"{name}.yaml").read_text())
        assert not validator.is_valid(document), name


def test_the_spec_reference_names_every_node_kind_and_rule_code() -> None:
    text = (DOCS / "spec.md").read_text(encoding="utf-8")
    for kind in ("action", "operation", "parallel", "barrier", "wait", "terminal"):
        assert f"`{kind}`" in text, kind
    for code in ErrorCode:
        if code.value.startswith(("GRAPH_", "DATAFLOW_", "SCHEMA_")):
            assert code.value in text, f"{code.value} is not explained in docs/spec.md"
