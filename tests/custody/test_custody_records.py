"""Custody's records stay the truth when a process keeps them indexed in memory.

Each FileCustody reads only the new tail of its append-only logs and skips
rewriting a record whose content would not change. These tests use two
instances on one root (two processes would behave the same: nothing is shared
but the files) to show that what one instance wrote is seen by the other, and
that an unchanged step leaves the records untouched.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from custody_helpers import DELIVERY, Clock, make_site, preview, settle

from contracts import ErrorCode, InvocationId
from execution_system.custody import FileCustody
from execution_system.custody._state import _read_small


def _records(custody: FileCustody) -> Path:
    return custody.root / "deliveries" / DELIVERY


def _stamp(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns


def _step(custody: FileCustody, invocation: str) -> str:
    site = make_site(invocation=InvocationId(invocation))
    verdict = custody.validate(preview(custody.issue(site, "write").token, site))
    assert verdict.accepted, verdict
    assert verdict.savepoint is not None
    custody.advance(DELIVERY, verdict.savepoint)
    return verdict.savepoint


def test_a_nonce_burned_by_another_instance_is_refused(
    custody: FileCustody, opened: Callable[[], Path], clock: Clock
) -> None:
    _step(custody, "inv-warm-1")
    _step(custody, "inv-warm-2")  # this instance has now indexed a non-empty nonce log
    other = FileCustody(custody.root, clock=clock)
    site = make_site(invocation=InvocationId("inv-2"))
    cap = other.issue(site, "write")
    assert other.validate(preview(cap.token, site)).accepted
    verdict = custody.validate(preview(cap.token, site))
    assert verdict.code is ErrorCode.CAPABILITY_REPLAYED


def test_a_savepoint_recorded_by_another_instance_is_listed(
    custody: FileCustody, opened: Callable[[], Path], clock: Clock
) -> None:
    before = len(custody.savepoints(DELIVERY))
    other = FileCustody(custody.root, clock=clock)
    site = make_site()
    cap = other.issue(site, "write", ("src",))
    (opened() / "src" / "new.py").write_text("new\n")
    verdict = other.validate(preview(cap.token, site))
    assert verdict.accepted
    listed = [info.savepoint for info in custody.savepoints(DELIVERY)]
    assert len(listed) == before + 1
    assert listed[-1] == verdict.savepoint


def test_an_unchanged_step_rewrites_neither_head_nor_stat_cache(
    custody: FileCustody, opened: Callable[[], Path]
) -> None:
    head_file = _records(custody) / "head"
    cache_file = _records(custody) / "statcache.json"
    settle()  # the seed's files leave the racy window: every scan now caches the same rows
    first = _step(custody, "inv-1")
    head_before, cache_before = _stamp(head_file), _stamp(cache_file)
    for n in range(2, 5):
        assert _step(custody, f"inv-{n}") == first
    assert _stamp(head_file) == head_before
    assert _stamp(cache_file) == cache_before
    assert custody.head(DELIVERY) == first


def test_a_head_moved_by_another_instance_is_written_again(
    custody: FileCustody, opened: Callable[[], Path], clock: Clock
) -> None:
    base = _step(custody, "inv-1")  # written (and remembered) by this instance
    other = FileCustody(custody.root, clock=clock)
    site = make_site(invocation=InvocationId("inv-2"))
    cap = other.issue(site, "write", ("src",))
    (opened() / "src" / "new.py").write_text("new\n")
    verdict = other.validate(preview(cap.token, site))
    assert verdict.savepoint is not None
    other.advance(DELIVERY, verdict.savepoint)
    assert custody.head(DELIVERY) == verdict.savepoint
    custody.advance(DELIVERY, base)
    assert other.head(DELIVERY) == base
    assert (_records(custody) / "head").read_text().strip() == base


def test_a_retired_and_reopened_delivery_starts_with_fresh_records(
    custody: FileCustody, opened: Callable[[], Path], clock: Clock
) -> None:
    _step(custody, "inv-1")
    _step(custody, "inv-2")  # indexed: two nonces, two savepoints' worth of log
    other = FileCustody(custody.root, clock=clock)
    other.retire(DELIVERY)
    head = other.open(DELIVERY)
    assert [info.savepoint for info in custody.savepoints(DELIVERY)] == [head]
    # The new logs are other files: read from their start, not from the old offset.
    site = make_site(invocation=InvocationId("inv-3"))
    caps = [other.issue(site, "write") for _ in range(3)]
    for cap in caps:
        assert other.validate(preview(cap.token, site)).accepted
    for cap in caps:
        verdict = custody.validate(preview(cap.token, site))
        assert verdict.code is ErrorCode.CAPABILITY_REPLAYED


def test_a_torn_nonce_line_is_skipped_then_closed(
    custody: FileCustody, opened: Callable[[], Path]
) -> None:
    _step(custody, "inv-1")
    with open(_records(custody) / "nonces", "ab") as log:
        log.write(b"torn-frag")  # a crash mid-append
    _step(custody, "inv-2")  # reads past nothing, then closes the fragment
    site = make_site(invocation=InvocationId("inv-3"))
    cap = custody.issue(site, "write")
    assert custody.validate(preview(cap.token, site)).accepted
    assert custody.validate(preview(cap.token, site)).code is ErrorCode.CAPABILITY_REPLAYED
    lines = (_records(custody) / "nonces").read_bytes().split(b"\n")
    assert b"torn-frag" in lines


@pytest.mark.parametrize("size", [0, 72, 4095, 4096, 4097, (1 << 20) + 4096, (1 << 20) + 4097])
def test_a_small_file_is_read_whole_whatever_its_size(tmp_path: Path, size: int) -> None:
    # The head is read through one descriptor; a file larger than any head is read to its end.
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    assert _read_small(str(tmp_path / "f")) == data
