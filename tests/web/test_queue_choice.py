"""A request's own ``queue`` choice: the work is recorded and left to the fleet."""

from __future__ import annotations

import time

from tests.web.conftest import SPEC, Site


def test_queue_true_admits_and_answers_without_running(site: Site) -> None:
    admitted = site.call(
        "POST",
        "/api/v1/deliveries",
        "operator",
        body={"spec": SPEC, "input": {"question": "q"}, "queue": True},
    )
    assert admitted.status_code == 201, admitted.text
    assert admitted.json()["status"] == "queued"
    delivery = site.secrets["first"]
    correlation = site.host.status(delivery).suspension.correlation
    answered = site.call(
        "POST",
        f"/api/v1/deliveries/{delivery}/input",
        "agent",
        body={"correlation": correlation, "response": "blue", "queue": True},
    )
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "queued"
    assert set(site.host.queued_deliveries(10)) == {admitted.json()["delivery"], delivery}


def test_a_live_serve_runner_makes_queueing_the_default(site: Site) -> None:
    from execution_system.web import create_app, fleet_source
    from tests.web.conftest import EXECUTORS

    site.app = create_app(
        site.host, tokens=site.tokens, executors=EXECUTORS, runners=fleet_source(site.host)
    )
    body = {"spec": SPEC, "input": {"question": "q"}}
    inline = site.call("POST", "/api/v1/deliveries", "operator", body=body)
    assert inline.json()["status"] == "suspended"  # nobody serves the store
    site.host.runner_heartbeat("r1", time.time())
    kinds = [r["kind"] for r in site.call("GET", "/api/v1/runners", "viewer").json()["runners"]]
    assert kinds == ["serve", "web"]
    queued = site.call("POST", "/api/v1/deliveries", "operator", body={**body, "key": "k2"})
    assert queued.json()["status"] == "queued"
    chosen = site.call(
        "POST", "/api/v1/deliveries", "operator", body={**body, "key": "k3", "queue": False}
    )
    assert chosen.json()["status"] == "suspended"
    site.host.runner_gone("r1")
    again = site.call("POST", "/api/v1/deliveries", "operator", body={**body, "key": "k4"})
    assert again.json()["status"] == "suspended"
