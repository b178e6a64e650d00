"""The strict YAML rules hold on both parsers: libyaml's (the default) and the pure-Python one.

Documents are parsed by PyYAML's C parser when libyaml is installed and by its
Python parser otherwise; the strictness rules (no aliases or anchors, no
duplicate keys, no merge keys, no implicit timestamps, a bounded depth, JSON
values only) must not depend on which. Each rule is checked on each path,
with the same code and the same location.
"""

from __future__ import annotations

import pytest
import yaml

from contracts import ErrorCode, ExecsysError
from execution_system import _loading
from execution_system._loading import parse_document

LOADERS = ["c", "python"]

#: rule -> (document, code, location after the document name, or "" for none)
RULES: dict[str, tuple[str, ErrorCode, str]] = {
    "alias": ("a: &x 1\nb: *x\n", ErrorCode.YAML_ALIAS_REFUSED, ":line 1"),
    "alias in a list": ("a: [1]\nb:\n  - &y 2\n  - *y\n", ErrorCode.YAML_ALIAS_REFUSED, ":line 3"),
    "unused anchor": ("a: 1\nb: &z {c: 2}\n", ErrorCode.YAML_ALIAS_REFUSED, ":line 2"),
    "duplicate key": ("a: 1\nb: 2\na: 3\n", ErrorCode.DUPLICATE_KEY, ":line 3"),
    "duplicate nested key": ("a:\n  b: 1\n  b: 2\n", ErrorCode.DUPLICATE_KEY, ":line 3"),
    "duplicate flow key": ("a: {b: 1, b: 2}\n", ErrorCode.DUPLICATE_KEY, ":line 1"),
    "merge key": ("a: 1\n<<: {b: 2}\n", ErrorCode.PARSE_ERROR, ":line 2"),
    "python tag": ("a: !!python/object:os.system x\n", ErrorCode.PARSE_ERROR, ":line 1"),
    "non-string key": ("1: a\n", ErrorCode.PARSE_ERROR, ""),
    "boolean key": ("yes: a\n", ErrorCode.PARSE_ERROR, ""),
    "too deep": ("a: " + "[" * 70 + "]" * 70 + "\n", ErrorCode.DOCUMENT_TOO_DEEP, ""),
    "far too deep": ("a: " + "[" * 100_000 + "\n", ErrorCode.DOCUMENT_TOO_DEEP, ""),
    "malformed": ("a: [1, 2\nb: 3\n", ErrorCode.PARSE_ERROR, ":line 2"),
}


@pytest.fixture(params=LOADERS)
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setattr(_loading, "_LOADER", _loading._StrictLoader)
    elif not yaml.__with_libyaml__:
        pytest.skip("PyYAML is built without libyaml")
    return str(request.param)


def test_the_default_parser_is_libyaml() -> None:
    # The point of the C path is speed on large specs; it must be the one in use.
    assert yaml.__with_libyaml__
    assert _loading._LOADER is not _loading._StrictLoader
    assert issubclass(_loading._LOADER, _loading._CParser)


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_refuses_on_each_parser(loader: str, rule: str) -> None:
    text, code, where = RULES[rule]
    with pytest.raises(ExecsysError) as caught:
        parse_document(text.encode(), name="doc.yaml")
    assert caught.value.code is code, caught.value
    if where:
        assert caught.value.path == f"doc.yaml{where}"


def test_timestamps_stay_strings(loader: str) -> None:
    value = parse_document(b"when: 2024-01-02\nat: 2024-01-02T03:04:05Z\n", name="d")
    assert value == {"when": "2024-01-02", "at": "2024-01-02T03:04:05Z"}


def test_both_parsers_read_the_same_values() -> None:
    text = (
        b"spec: execution-system/v1\nn: 3\nf: 1.5\nok: true\nnone: null\n"
        b"list: [a, 'b', \"c\"]\nblock: |\n  line one\n  line two\nnested: {x: {y: [1, {z: 2}]}}\n"
    )
    c_value = parse_document(text, name="d")
    python_value = yaml.load(text.decode(), Loader=_loading._StrictLoader)
    assert c_value == python_value
    assert c_value["block"] == "line one\nline two\n"
