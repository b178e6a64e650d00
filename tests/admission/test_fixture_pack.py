"""Every fixture spec is refused with its recorded code and path, or admitted.

``tests/fixtures/specs/invalid/expected.yaml`` maps each file to the code and
path admission must report; ``{file}`` in a path stands for the path the file
was loaded by. All fixtures run in-process through ``load_graph``; a
representative subset also runs through the real ``execsys graph check``
process, which must exit 2 with exactly one ``execsys: CODE ...`` line on
stderr and never a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts import ErrorCode, ExecsysError, exit_status, graph_digest
from execution_system import MAX_DOCUMENT_BYTES, load_graph
from host import OPERATIONS

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "tests" / "fixtures" / "specs"
INVALID = SPECS / "invalid"
VALID = SPECS / "valid"
EXPECTED: dict[str, dict[str, str]] = yaml.safe_load((INVALID / "expected.yaml").read_text())
EXECSYS = Path(sys.executable).with_name("execsys")

#: One or more per family: files, YAML hazards, shape, structure, schemas, dataflow.
SUBPROCESS_SUBSET = (
    "empty.yaml",
    "binary-garbage.yaml",
    "alias-bomb.yaml",
    "duplicate-key.json",
    "invalid-yaml.yaml",
    "not-a-mapping.yaml",
    "unknown-key-node.yaml",
    "bad-spec-version.yaml",
    "route-not-covered.yaml",
    "select-admits-non-branch.yaml",
    "barrier-entered-from-outside.yaml",
    "unbounded-cycle.yaml",
    "unknown-operation.yaml",
    "schema-misspelled-keyword.yaml",
    "dataflow-after-select.yaml",
)

#: Admission codes the pack must exercise; a new rule needs a fixture here too.
#: Left out: FILE_NOT_FOUND and FILE_TOO_LARGE (tested below without a fixture
#: file), GRAPH_INVALID_FAILURE_TARGET (catalogued, raised by no rule yet).
MUST_COVER = {
    code
    for code in ErrorCode
    if code.value.startswith(("SPEC_", "GRAPH_", "DATAFLOW_", "SCHEMA_"))
    or code
    in {
        ErrorCode.FILE_EMPTY,
        ErrorCode.FILE_NOT_TEXT,
        ErrorCode.PARSE_ERROR,
        ErrorCode.DOCUMENT_TOO_DEEP,
        ErrorCode.DUPLICATE_KEY,
        ErrorCode.YAML_ALIAS_REFUSED,
    }
} - {ErrorCode.GRAPH_INVALID_FAILURE_TARGET}


def _load(path: Path) -> Any:
    return load_graph(path, operations=frozenset(OPERATIONS))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXECSYS), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def _assert_refused_process(result: subprocess.CompletedProcess[str], code: str, path: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"execsys: {code}"), lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    document = json.loads(result.stdout)
    assert set(document) == {"error"}
    assert document["error"]["code"] == code
    assert document["error"]["path"] == path
    assert document["error"]["message"]


def _expected(name: str, loaded_as: Path) -> tuple[str, str]:
    entry = EXPECTED[name]
    return entry["code"], entry["path"].replace("{file}", str(loaded_as))


def test_every_fixture_has_an_expectation_and_every_expectation_a_fixture() -> None:
    files = {p.name for p in INVALID.iterdir() if p.name != "expected.yaml"}
    assert files == set(EXPECTED)


def test_expectations_name_catalogued_usage_codes() -> None:
    for name, entry in EXPECTED.items():
        assert set(entry) == {"code", "path"}, name
        code = ErrorCode(entry["code"])
        assert exit_status(code) == 2, name


def test_the_pack_covers_every_admission_rule() -> None:
    covered = {ErrorCode(entry["code"]) for entry in EXPECTED.values()}
    assert sorted(MUST_COVER - covered) == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_invalid_fixture_is_refused_in_process(name: str) -> None:
    path = INVALID / name
    code, where = _expected(name, path)
    with pytest.raises(ExecsysError) as caught:
        _load(path)
    assert (caught.value.code.value, caught.value.path) == (code, where)
    line = caught.value.one_line()
    assert "\n" not in line
    assert line.startswith(code)


@pytest.mark.parametrize("name", SUBPROCESS_SUBSET)
def test_invalid_fixture_is_refused_by_the_cli(name: str) -> None:
    path = INVALID / name
    code, where = _expected(name, path)
    _assert_refused_process(_run("graph", "check", str(path), "--json"), code, where)


def test_cli_without_json_prints_only_the_error_line() -> None:
    path = INVALID / "route-not-covered.yaml"
    result = _run("graph", "check", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("execsys: GRAPH_ROUTE_NOT_COVERED at nodes.a.routes.cases:")
    assert result.stderr.count("\n") == 1


def _too_large(tmp_path: Path) -> Path:
    path = tmp_path / "huge.yaml"
    head = b"spec: execution-system/v1\ngraph: huge\n"
    filler = b"# padding padding padding padding padding padding padding padding\n"
    count = (MAX_DOCUMENT_BYTES - len(head)) // len(filler) + 2
    path.write_bytes(head + filler * count)
    assert path.stat().st_size > MAX_DOCUMENT_BYTES
    return path


def test_too_large_file_is_refused_in_process(tmp_path: Path) -> None:
    path = _too_large(tmp_path)
    with pytest.raises(ExecsysError) as caught:
        _load(path)
    assert caught.value.code is ErrorCode.FILE_TOO_LARGE
    assert caught.value.path == str(path)


def test_too_large_file_is_refused_by_the_cli(tmp_path: Path) -> None:
    path = _too_large(tmp_path)
    _assert_refused_process(
        _run("graph", "check", str(path), "--json"), "FILE_TOO_LARGE", str(path)
    )


def test_a_file_at_the_size_limit_is_read(tmp_path: Path) -> None:
    body = (VALID / "minimal.json").read_bytes()
    path = tmp_path / "padded.json"
    path.write_bytes(body + b" " * (MAX_DOCUMENT_BYTES - len(body)))
    assert path.stat().st_size == MAX_DOCUMENT_BYTES
    assert _load(path).graph == "minimal"


def test_missing_file_is_refused_by_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    _assert_refused_process(
        _run("graph", "check", str(path), "--json"), "FILE_NOT_FOUND", str(path)
    )


VALID_FILES = sorted(p.name for p in VALID.iterdir())


def test_valid_pack_has_the_promised_shapes() -> None:
    assert {
        "triage-review.yaml",
        "loop-max-visits.yaml",
        "subset-parallel-uneven.yaml",
        "wait-routes.yaml",
        "operation-all-true.yaml",
    } <= set(VALID_FILES)


@pytest.mark.parametrize("name", VALID_FILES)
def test_valid_fixture_admits_in_process(name: str) -> None:
    graph = _load(VALID / name)
    assert graph.nodes


@pytest.mark.parametrize("name", ["triage-review.yaml", "subset-parallel-uneven.yaml"])
def test_valid_fixture_admits_through_the_cli(name: str) -> None:
    path = VALID / name
    result = _run("graph", "check", str(path), "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    document = json.loads(result.stdout)
    graph = _load(path)
    assert document == {
        "ok": True,
        "graph": graph.graph,
        "nodes": len(graph.nodes),
        "digest": graph_digest(graph),
    }


def test_shipped_example_admits() -> None:
    _load(ROOT / "execution_system" / "examples" / "triage" / "spec.yaml")
    _load(ROOT / "examples" / "triage" / "spec.yaml")
