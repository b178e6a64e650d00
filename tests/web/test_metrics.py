"""``GET /metrics`` against a real store whose contents the test knows, scrape after scrape."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from contracts import ExecsysError, PythonBinding, ScriptedBinding
from execution_system import admit, parse_graph
from execution_system.web import create_app
from tests.web.conftest import EXECUTORS, ROOT, Site

FAILING = {
    "spec": "execution-system/v1",
    "graph": "web-failing",
    "start": "work",
    "nodes": {
        "work": {
            "kind": "action",
            "executor": "worker",
            "outputs": {"ok": {"type": "boolean"}},
            "next": "done",
        },
        "done": {"kind": "terminal", "outcome": "succeeded"},
    },
}


def samples(site: Site) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = site.call("GET", "/metrics").text
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str):
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def run_failing(site: Site, reply: dict[str, object]) -> str:
    delivery = admit(
        parse_graph(FAILING),
        {},
        executors={"worker": ScriptedBinding(scripted=(reply,))},
        nonce=uuid.uuid4().hex,
    )
    report = asyncio.run(site.host.run(delivery))
    return str(report.delivery)


def test_steps_failures_and_latency_come_from_the_journals_scrape_after_scrape(
    site: Site, tmp_path: Path
) -> None:
    # The store: 'first' asked its question (one blocked step).
    found = samples(site)
    assert value(found, "execsys_steps_committed_total", result="blocked") == 1
    assert value(found, "execsys_steps_committed_total", result="completed") == 0
    assert value(found, "execsys_step_seconds_count") == 1
    # Answered, it completes 'ask' (one completed step) and blocks at its wait (one more).
    did = site.secrets["first"]
    correlation = site.host.status(did).suspension.correlation
    asyncio.run(site.host.answer(did, correlation, "blue"))
    failed = run_failing(site, {"status": "failed", "reason": "no-luck", "retryable": False})
    run_failing(site, {"status": "completed", "output": {"ok": "not a boolean"}})
    found = samples(site)
    assert value(found, "execsys_steps_committed_total", result="blocked") == 2
    assert value(found, "execsys_steps_committed_total", result="completed") == 1
    assert value(found, "execsys_steps_committed_total", result="failed") == 2
    codes = {dict(k[1])["code"]: v for k, v in found.items() if k[0].startswith("execsys_exec")}
    assert codes == {"NODE_FAILED": 1, "OUTPUT_SCHEMA_VIOLATION": 1}, codes
    assert value(found, "execsys_step_seconds_count") == 5
    assert value(found, "execsys_step_seconds_bucket", le="+Inf") == 5
    assert value(found, "execsys_deliveries", status="failed") == 2
    # Approved, the wait's step completes, and so does the terminal's.
    site.call(
        "POST",
        f"/api/v1/deliveries/{did}/resolve",
        "approver",
        body={"node": "signoff", "role": "maintainer", "result": {"approved": True}},
    )
    # Retirement keeps the journal: its steps stay counted.
    asyncio.run(site.host.retire(failed, "CHG-1"))
    again = samples(site)
    assert value(again, "execsys_steps_committed_total", result="completed") == 3
    assert value(again, "execsys_steps_committed_total", result="failed") == 2
    assert value(again, "execsys_executor_failures_total", code="NODE_FAILED") == 1
    assert value(again, "execsys_step_seconds_count") == 7
    # A new process counts every journal once: the same totals as counting as they came.
    fresh = Site(site.runner, site.tokens_path, site.tokens, site.secrets)
    fresh.app = create_app(site.host, tokens=site.tokens, executors=EXECUTORS)
    recount = samples(fresh)
    journal_figures = ("execsys_steps_committed", "execsys_step_seconds", "execsys_executor")
    for key, counted in again.items():
        if key[0].startswith(journal_figures) and not key[0].endswith("_created"):
            # Sums of float seconds differ in the last bit with the order they were added.
            assert recount[key] == pytest.approx(counted, rel=1e-9, abs=1e-12), key


def test_the_step_latency_histogram_places_a_slow_step_above_its_duration(site: Site) -> None:
    before = samples(site)
    delivery = admit(
        parse_graph(FAILING),
        {},
        executors={"worker": PythonBinding(python="tests.web.agents:pause", path=str(ROOT))},
        nonce=uuid.uuid4().hex,
    )
    assert asyncio.run(site.host.run(delivery)).status.value == "completed"
    after = samples(site)
    count = value(after, "execsys_step_seconds_count")
    assert count == value(before, "execsys_step_seconds_count") + 2  # 'work', then 'done'
    # 'work' slept 0.3 s between its start and its commit: it is above the 0.25 s bound
    # (only the terminal's step may have landed below it).
    fast = value(after, "execsys_step_seconds_bucket", le="0.25")
    assert fast <= value(before, "execsys_step_seconds_bucket", le="0.25") + 1
    assert (
        value(after, "execsys_step_seconds_sum") >= value(before, "execsys_step_seconds_sum") + 0.3
    )


def test_lease_counters_are_the_hosts(site: Site, tmp_path: Path) -> None:
    did = site.start()
    host = site.host
    granted = host.lease_counts()["granted"]
    assert granted >= 2  # the two runs of this test's store
    leases = host.leases
    leases.acquire(did)  # no event loop: no renewal task, the test renews by hand
    assert leases.renew(did) and leases.renew(did)
    db = sqlite3.connect(tmp_path / "state.db")
    db.execute("UPDATE execsys_leases SET token = token + 5 WHERE delivery = ?", (did,))
    db.commit()
    assert not leases.renew(did)  # taken over
    with pytest.raises(ExecsysError) as fenced, leases.transaction(did):
        raise AssertionError("a fenced transaction must not open")
    assert fenced.value.code.value == "LEASE_FENCED"
    leases.release(did)
    found = samples(site)
    assert value(found, "execsys_lease_grants_total") == granted + 1
    assert value(found, "execsys_lease_renewals_total") == 2
    assert value(found, "execsys_lease_renewals_lost_total") == 1
    assert value(found, "execsys_lease_fencing_refusals_total") == 1


def test_runners_come_from_one_source(site: Site) -> None:
    rows = [
        {"name": "r-1", "kind": "serve", "alive": True},
        {"name": "r-2", "kind": "serve", "alive": False},
        {"name": "r-3", "kind": "serve", "alive": True},
    ]
    site.app = create_app(site.host, tokens=site.tokens, executors=EXECUTORS, runners=lambda: rows)
    assert value(samples(site), "execsys_runners_alive") == 2
    listed = site.call("GET", "/api/v1/runners", "viewer").json()
    assert listed == {"runners": rows}
