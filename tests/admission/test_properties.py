"""Properties of admission over generated control graphs.

* every generated graph admits (and still admits with its keys reordered);
* random mutations of admissible documents (keys deleted, renamed or added,
  values changed or retyped, successors retargeted, nodes dropped) and of their
  YAML text are either admitted or refused with one catalogued usage code,
  never another exception;
* the digests (``graph_digest`` and ``AdmittedDelivery.digest``) do not depend
  on key order or on YAML versus JSON, and do depend on content.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import ErrorCode, ExecsysError, exit_status, graph_digest
from execution_system import admit, check_graph, parse_document, parse_graph
from host import OPERATIONS
from tests.strategies import control_graphs, identifiers, json_values, minimal_input

OPS = frozenset(OPERATIONS)
ADMISSION_FAMILIES = ("SPEC_", "GRAPH_", "DATAFLOW_", "SCHEMA_")
TEXT_FAMILIES = (*ADMISSION_FAMILIES, "FILE_", "PARSE_", "DOCUMENT_", "DUPLICATE_KEY", "YAML_")
SUCCESSOR_KEYS = ("next", "on_failure", "barrier", "start", "select")

FAST = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _admit_document(document: Any) -> None:
    check_graph(parse_graph(document), OPS)


def _assert_catalogued(exc: ExecsysError, families: tuple[str, ...]) -> None:
    assert isinstance(exc.code, ErrorCode)
    assert exc.code.value.startswith(families), exc.one_line()
    assert exit_status(exc.code) == 2
    assert "\n" not in exc.one_line()


# --- every generated graph admits --------------------------------------------------


@FAST
@given(control_graphs())
def test_generated_graphs_admit(document: dict[str, Any]) -> None:
    graph = parse_graph(document)
    check_graph(graph, OPS)
    delivery = admit(graph, minimal_input(document), operations=OPS)
    assert delivery.graph == graph


def _reorder(value: Any, data: st.DataObject) -> Any:
    if isinstance(value, dict):
        keys = data.draw(st.permutations(list(value)))
        return {k: _reorder(value[k], data) for k in keys}
    if isinstance(value, list):
        return [_reorder(v, data) for v in value]
    return value


@FAST
@given(control_graphs(), st.data())
def test_key_order_changes_neither_admission_nor_digests(
    document: dict[str, Any], data: st.DataObject
) -> None:
    shuffled = _reorder(document, data)
    first, second = parse_graph(document), parse_graph(shuffled)
    check_graph(second, OPS)
    assert graph_digest(first) == graph_digest(second)
    value = minimal_input(document)
    reordered_input = _reorder(value, data)
    assert admit(first, value).digest == admit(second, reordered_input).digest


@FAST
@given(control_graphs(), st.booleans())
def test_yaml_and_json_of_one_document_have_one_digest(
    document: dict[str, Any], flow: bool
) -> None:
    as_yaml = yaml.safe_dump(document, sort_keys=False, default_flow_style=flow).encode()
    as_json = json.dumps(document, indent=1).encode()
    from_yaml = parse_graph(parse_document(as_yaml, name="spec.yaml"))
    from_json = parse_graph(parse_document(as_json, name="spec.json", json_only=True))
    assert graph_digest(from_yaml) == graph_digest(from_json) == graph_digest(parse_graph(document))
    value = minimal_input(document)
    assert admit(from_yaml, value).digest == admit(from_json, value).digest


@FAST
@given(control_graphs(), identifiers)
def test_digest_depends_on_content(document: dict[str, Any], name: str) -> None:
    renamed = {**document, "graph": document["graph"] + "-" + name}
    assert graph_digest(parse_graph(renamed)) != graph_digest(parse_graph(document))


# --- mutations -------------------------------------------------------------------

Path_ = tuple[Any, ...]


def _locations(value: Any, path: Path_ = ()) -> list[Path_]:
    found: list[Path_] = []
    if isinstance(value, dict):
        for key, sub in value.items():
            found.append((*path, key))
            found.extend(_locations(sub, (*path, key)))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            found.append((*path, i))
            found.extend(_locations(sub, (*path, i)))
    return found


def _mappings(value: Any, path: Path_ = ()) -> list[Path_]:
    found: list[Path_] = []
    if isinstance(value, dict):
        found.append(path)
        for key, sub in value.items():
            found.extend(_mappings(sub, (*path, key)))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            found.extend(_mappings(sub, (*path, i)))
    return found


def _parent(document: Any, path: Path_) -> Any:
    for step in path[:-1]:
        document = document[step]
    return document


def _flip(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else 0
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return {str(i): v for i, v in enumerate(value)}
    if isinstance(value, dict):
        return list(value.values())
    return False


def _mutate(document: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    doc = copy.deepcopy(document)
    kind = data.draw(
        st.sampled_from(
            ["delete", "rename", "change", "add", "retarget", "drop-node", "flip", "dup-list"]
        ),
        label="mutation",
    )
    locations = _locations(doc)
    node_ids = list(doc["nodes"])
    if kind == "delete":
        path = data.draw(st.sampled_from(locations))
        del _parent(doc, path)[path[-1]]
    elif kind == "rename":
        keyed = [p for p in locations if isinstance(p[-1], str)]
        path = data.draw(st.sampled_from(keyed))
        parent = _parent(doc, path)
        new = data.draw(
            st.sampled_from([path[-1] + "s", path[-1].upper(), "kind", "next"]) | identifiers
        )
        parent[new] = parent.pop(path[-1])
    elif kind == "change":
        path = data.draw(st.sampled_from(locations))
        _parent(doc, path)[path[-1]] = data.draw(json_values)
    elif kind == "add":
        where = data.draw(st.sampled_from(_mappings(doc)))
        target: Any = doc
        for step in where:
            target = target[step]
        key = data.draw(st.sampled_from(["max_visits", "routes", "select", "extra"]) | identifiers)
        target[key] = data.draw(json_values | st.sampled_from(node_ids))
    elif kind == "retarget":
        succ = [
            p
            for p in locations
            if p[-1] in SUCCESSOR_KEYS
            or (len(p) >= 2 and p[-2] in ("cases", "branches", "required", "inputs"))
        ]
        path = data.draw(st.sampled_from(succ))
        old = _parent(doc, path)[path[-1]]
        choice = data.draw(st.sampled_from([*node_ids, "input", "nowhere"]))
        if isinstance(old, str) and "." in old:  # a reference: keep its shape
            port = data.draw(st.sampled_from(["ok", "pick", old.split(".", 1)[1].rstrip("?")]))
            choice = f"{choice}.{port}" + data.draw(st.sampled_from(["", "?"]))
        _parent(doc, path)[path[-1]] = choice
    elif kind == "drop-node":
        # An earlier round may have flipped 'nodes' into a list (or emptied it).
        if isinstance(doc["nodes"], dict) and doc["nodes"]:
            del doc["nodes"][data.draw(st.sampled_from(list(doc["nodes"])))]
    elif kind == "flip":
        path = data.draw(st.sampled_from(locations))
        parent = _parent(doc, path)
        parent[path[-1]] = _flip(parent[path[-1]])
    else:
        lists = [p for p in locations if isinstance(_parent(doc, p)[p[-1]], list)]
        lists = [p for p in lists if _parent(doc, p)[p[-1]]]
        if lists:
            path = data.draw(st.sampled_from(lists))
            items = _parent(doc, path)[path[-1]]
            items.append(items[0])
    return doc


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(control_graphs(max_segments=4), st.data())
def test_mutated_documents_are_admitted_or_refused_with_a_code(
    document: dict[str, Any], data: st.DataObject
) -> None:
    mutated = document
    for _ in range(data.draw(st.integers(1, 3), label="rounds")):
        mutated = _mutate(mutated, data) if mutated.get("nodes") else mutated
    try:
        _admit_document(mutated)
    except ExecsysError as exc:
        _assert_catalogued(exc, ADMISSION_FAMILIES)


@FAST
@given(control_graphs(max_segments=3), st.data())
def test_mutated_text_is_admitted_or_refused_with_a_code(
    document: dict[str, Any], data: st.DataObject
) -> None:
    text = yaml.safe_dump(document, sort_keys=False).encode()
    edits = data.draw(st.integers(1, 4))
    for _ in range(edits):
        at = data.draw(st.integers(0, len(text)))
        piece = data.draw(
            st.sampled_from(
                [b"", b":", b"-", b" ", b"\n", b"{", b"[", b"&a", b"*a", b"\t", b"\xff", b"'"]
            )
        )
        cut = data.draw(st.integers(0, 3))
        text = text[:at] + piece + text[at + cut :]
    try:
        _admit_document(parse_document(text, name="spec.yaml"))
    except ExecsysError as exc:
        _assert_catalogued(exc, TEXT_FAMILIES)
