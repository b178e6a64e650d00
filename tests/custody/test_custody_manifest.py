"""A savepoint id is the RFC 8785 digest of its manifest, whatever the names hold."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from custody_helpers import DELIVERY
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import digest_of
from execution_system.custody import FileCustody

# Names as a file system and custody admit them: no control characters, no '/',
# no lone surrogates (what undecodable names become), not '.' or '..', short enough.
_NAME = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/"),
    min_size=1,
    max_size=8,
).filter(lambda name: name not in (".", "..") and len(name.encode()) < 200)
_FILES = st.dictionaries(
    _NAME, st.tuples(st.binary(max_size=16), st.sampled_from([0o600, 0o644, 0o755])), max_size=6
)


@settings(max_examples=30, deadline=None)
@given(files=_FILES, links=st.dictionaries(_NAME, _NAME, max_size=3))
def test_savepoint_id_is_the_canonical_digest_of_the_manifest(
    files: dict[str, tuple[bytes, int]], links: dict[str, str]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        custody = FileCustody(Path(tmp) / "custody")
        custody.open(DELIVERY)
        ws = Path(custody.workspace(DELIVERY))
        for name, (data, mode) in files.items():
            (ws / "f" / name).parent.mkdir(exist_ok=True)
            (ws / "f" / name).write_bytes(data)
            os.chmod(ws / "f" / name, mode)
        for name, target in links.items():
            (ws / "l").mkdir(exist_ok=True)
            (ws / "l" / name).symlink_to(target)
        report = custody.snapshot(DELIVERY)
        entries = [e.model_dump(mode="json") for e in custody.manifest(DELIVERY, report.savepoint)]
        expected = digest_of({"format": "execution-system/custody-manifest/v1", "entries": entries})
        assert report.savepoint == expected
        assert [e["path"] for e in entries] == sorted(e["path"] for e in entries)
