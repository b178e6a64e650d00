"""A digests-only bundle's record lines, checked as one block, say what line-by-line says."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts._canonical import canonical_bytes
from contracts._errors import ExecsysError
from host.journal import _bundle
from tests.audit.make_fixtures import FIXTURES

_HEAD = b'{"digest":"'
_GOOD = _HEAD + b"sha256:" + b"ab" * 32 + b'"}'

# Pieces a record line is made of, good and bad: the block check must agree
# with ``_record_line`` on every combination, non-ASCII bytes included.
_line = st.one_of(
    st.just(_GOOD),
    st.binary(min_size=70, max_size=72)
    .filter(lambda b: b"\n" not in b)
    .map(lambda d: _HEAD + d + b'"}'),
    st.binary(max_size=90).filter(lambda b: b"\n" not in b),
    st.just(_GOOD[:-1]),
    st.just(_GOOD + b" "),
    st.just(_HEAD + b"sha256:" + b"ab" * 32 + b'","value":1}'),
)


def _one_by_one(block: list[bytes]) -> list[str] | None:
    try:
        return [_bundle._record_line(line, None, "line") for line in block]
    except ExecsysError:
        return None


@given(st.lists(_line, max_size=6))
def test_the_block_check_agrees_with_the_line_check(block: list[bytes]) -> None:
    assert _bundle._digest_lines(block) == _one_by_one(block)


def test_a_line_out_of_shape_is_named_by_the_line_check() -> None:
    data = (FIXTURES / "fanout-digests.bundle").read_bytes()
    lines = data.split(b"\n")
    count = int(data[: data.index(b"\n")].split(b'"journal":')[1].split(b",")[0])
    record = 1 + count  # the first record line
    assert lines[record].startswith(_HEAD)
    lines[record] = lines[record][:-2] + b'","value":null}'
    body = b"\n".join(lines[:-2]) + b"\n"
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    forged = body + canonical_bytes({"digest": digest, "signature": None}) + b"\n"
    with pytest.raises(ExecsysError) as refused:
        _bundle.parse_bundle(forged)
    assert refused.value.code.value == "BUNDLE_MALFORMED"
    assert refused.value.path == f"line {record + 1}"
    assert "digests alone" in refused.value.message
