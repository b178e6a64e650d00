"""The fast canonical encoder is byte-identical to the RFC 8785 reference encoder."""

from __future__ import annotations

from typing import Any

import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import canonical_bytes

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(_values)
def test_fast_and_reference_encoders_agree(value: Any) -> None:
    try:
        expected = rfc8785.dumps(value)
    except (rfc8785.IntegerDomainError, rfc8785.FloatDomainError):
        return
    assert canonical_bytes(value) == expected


def test_non_ascii_member_names_keep_utf16_order() -> None:
    value = {"\U0001f600": 1, "\uff61": 2, "a": 3}
    assert canonical_bytes(value) == rfc8785.dumps(value)


_plain_floats = st.floats(1e-4, 1e16, exclude_max=True) | st.floats(-1e16, -1e-4, exclude_min=True)


@settings(max_examples=2000, deadline=None)
@given(st.lists(_plain_floats | st.integers(-(2**53) + 1, 2**53 - 1), max_size=4))
def test_floats_on_the_fast_path_print_as_the_reference_does(values: list[Any]) -> None:
    assert canonical_bytes({"v": values}) == rfc8785.dumps({"v": values})


def test_edges_of_the_fast_float_range_agree() -> None:
    edges = [1e-4, 1.0001e-4, 9.9e-5, 1e16, 9999999999999998.0, 1e16 - 2.5, 0.5, 5.0, 1e21]
    for value in edges + [-v for v in edges]:
        assert canonical_bytes([value]) == rfc8785.dumps([value]), value


_integral_floats = st.integers(-(2**53) + 1, 2**53 - 1).map(float)


@settings(max_examples=1000, deadline=None)
@given(
    st.recursive(
        _integral_floats | _plain_floats | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=20,
    )
)
def test_integral_floats_take_the_fast_path_as_the_integers_they_print_as(value: Any) -> None:
    assert canonical_bytes(value) == rfc8785.dumps(value)


def test_edges_of_the_integral_float_range_agree() -> None:
    edges = [0.0, -0.0, 1.0, 60.0, 2.0**53 - 1, 2.0**53, 2.0**53 + 2, 2.0**60, 1e16, 1e21]
    for value in edges + [-v for v in edges]:
        assert canonical_bytes({"t": [value, (value,)]}) == rfc8785.dumps({"t": [value, [value]]})


def test_the_value_given_is_not_changed() -> None:
    value = {"timeout_s": 60.0, "nested": [1.0, {"x": 2.0}]}
    canonical_bytes(value)
    assert value == {"timeout_s": 60.0, "nested": [1.0, {"x": 2.0}]}
    assert type(value["timeout_s"]) is float and type(value["nested"][1]["x"]) is float
