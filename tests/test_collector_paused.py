"""The graph build pauses the cyclic collector and always gives it back as it found it."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

from contracts._gc import collector_paused
from execution_system import check_graph, parse_document, parse_graph


def test_the_collector_is_off_inside_and_back_on_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block still holds it
    assert gc.isenabled()


def test_an_error_inside_still_resumes_the_collector() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_blocks_on_two_threads_resume_only_when_both_left() -> None:
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused():
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    assert entered.wait(10)
    with collector_paused():
        pass
    assert not gc.isenabled()  # the other thread is still inside
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_loading_a_spec_and_a_refused_one_leave_the_collector_on() -> None:
    spec = Path(__file__).resolve().parents[1] / "examples" / "triage" / "spec.yaml"
    graph = parse_graph(parse_document(spec.read_bytes(), name="spec.yaml"))
    check_graph(graph)
    assert gc.isenabled()
    with pytest.raises(Exception, match="twice"):
        parse_document(b"a: 1\na: 2\n", name="dup.yaml")
    assert gc.isenabled()
