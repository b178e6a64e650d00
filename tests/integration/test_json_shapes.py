"""The ``--json`` and ``/api/v1`` shapes of the Host's reports, pinned key by key.

They are a public contract: a key renamed, dropped or added by accident, or a
value changing its JSON type, fails here. Shapes are compared, not values that
change from run to run (ids, digests, times).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.conftest import HERE, Fleet
from tests.web.conftest import Site, make_site


def shape(value: Any) -> Any:
    """The JSON shape of ``value``: keys kept, lists item by item, scalars by type."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    if value is None:
        return None
    return type(value).__name__


def same(value: Any, expected: Any) -> bool:
    """Whether ``value`` has the ``expected`` shape, keys in the same order too."""
    return shape(value) == expected and json.dumps(shape(value)) == json.dumps(expected)


STATUS = {
    "delivery": "str",
    "status": "str",
    "outcome": None,
    "suspension": None,
    "wait": {"node": "str", "kind": "str"},
    "message": "str",
}
LISTED = {"delivery": "str", "graph": "str", "status": "str", "outcome": None, "updated": "str"}
NODE = {"state": "str", "attempts": "int", "activations": "int"}
LEASE_RELEASED = {"state": "str", "holder": "str", "token": "int", "expires": None}
SAVEPOINT = {
    "savepoint": "str",
    "first": "str",
    "created": "float",
    "checkpoint": "str",
    "events": "int",
}
WAITING = {
    **STATUS,
    "graph": "str",
    "updated": "str",
    "suspensions": [],
    "waits": [
        {"approvals": "int", "kind": "str", "needed": "int", "node": "str", "roles": ["str"]}
    ],
    "nodes": {"approve": NODE, "done": NODE, "one": NODE, "three": NODE},
    "journal": {"head": "str", "events": "int"},
    "custody": {"savepoint": "str", "head": "str"},
    "checkpoint": "str",
    "directives": ["str", "str"],
    "interrupted": [],
    "lease": LEASE_RELEASED,
    "savepoints": [SAVEPOINT],
    "mismatches": [],
}
FACT = {
    "delivery": "str",
    "thread": "str",
    "digest": "str",
    "graph": "str",
    "status": "str",
    "authorization": "str",
    "actor": "str",
    "journal": {"head": "str", "events": "int"},
    "retired_at": "float",
    "fact": "str",
}
RETIRED = {
    **STATUS,
    "outcome": "str",
    "graph": "str",
    "retirement": {**dict(sorted(FACT.items())), "journal": {"events": "int", "head": "str"}},
    "directives": [],
}


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    made = Fleet(tmp_path / "scenario", f"sqlite:///{tmp_path / 'state.db'}")
    made.release.touch()
    root = made.root
    (root / "wait.yaml").write_text((HERE / "wait.yaml").read_text())
    (root / "authority.yaml").write_text("actors: {alice: [maintainer]}\napprover: alice\n")
    (root / "in.json").write_text('{"n": 1}')
    return made


def _json(fleet: Fleet, *args: str) -> Any:
    done = fleet.cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_cli_json_shapes_of_inspect_status_and_retire(fleet: Fleet) -> None:
    ran = _json(fleet, "run", "wait.yaml", "--input", "in.json", "--authority", "authority.yaml")
    delivery = ran["delivery"]
    assert same(ran, STATUS)
    inspected = _json(fleet, "inspect", delivery)
    assert same(inspected, WAITING)
    assert inspected["directives"] == ["resolve", "stop"]
    assert inspected["lease"]["state"] == "released"
    assert shape(_json(fleet, "status")) == {"deliveries": [LISTED], "needs_directive": []}
    assert shape(_json(fleet, "status", delivery)) == STATUS
    assert _json(fleet, "stop", delivery)["status"] == "stopped"
    listed = _json(fleet, "status")
    assert same(
        listed,
        {
            "deliveries": [{**LISTED, "outcome": "str"}],
            "needs_directive": [{"delivery": "str", "status": "str", "reasons": ["str"]}],
        },
    )
    assert listed["needs_directive"][0]["reasons"] == ["stopped by an operator"]
    stopped = _json(fleet, "inspect", delivery)
    assert set(stopped) == set(WAITING)
    fact = _json(fleet, "retire", delivery, "--authorization", "CHG-1")
    assert same(fact, {**FACT, "performed": "bool"})
    assert fact["performed"] is True and fact["status"] == "stopped"
    assert _json(fleet, "retire", delivery, "--authorization", "CHG-1")["performed"] is False
    retired = _json(fleet, "inspect", delivery)
    assert same(retired, RETIRED)
    assert retired["retirement"] == {k: v for k, v in fact.items() if k != "performed"}
    assert _json(fleet, "runners") == {"runners": []}


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return make_site(tmp_path)


API_LISTED = {"deliveries": [LISTED], "total": "int", "next": None, "needs_directive": []}


def test_the_api_shapes_of_listing_inspect_and_retire(site: Site) -> None:
    (first,) = (row.delivery for row in site.host.deliveries())
    page = site.host.delivery_page(limit=10).to_json()
    assert same(page, {"deliveries": [{**LISTED, "changed": "float"}], "total": "int"})
    listed = site.call("GET", "/api/v1/deliveries", "viewer")
    assert listed.status_code == 200, listed.text
    assert shape(listed.json()) == API_LISTED
    inspected = site.call("GET", f"/api/v1/deliveries/{first}/inspect", "viewer").json()
    suspended = {
        **STATUS,
        "suspension": {"correlation": "str", "node": "str", "question": {"text": "str"}},
        "wait": None,
        "graph": "str",
        "updated": "str",
        "suspensions": [{"correlation": "str", "node": "str", "question": {"text": "str"}}],
        "waits": [],
        "nodes": {"ask": NODE, "done": NODE, "signoff": NODE},
        "journal": {"head": "str", "events": "int"},
        "custody": {"savepoint": "str", "head": "str"},
        "checkpoint": "str",
        "directives": ["str", "str"],
        "interrupted": [],
        "lease": LEASE_RELEASED,
        "savepoints": [SAVEPOINT],
        "mismatches": [],
    }
    assert same(inspected, suspended)
    stopped = site.call("POST", f"/api/v1/deliveries/{first}/stop", "operator", body={})
    assert stopped.status_code == 200, stopped.text
    attention = site.call("GET", "/api/v1/deliveries?needs-directive=true", "viewer").json()
    assert same(
        attention,
        {
            **API_LISTED,
            "deliveries": [{**LISTED, "outcome": "str"}],
            "needs_directive": [{"delivery": "str", "reasons": ["str"]}],
        },
    )
    body = {"authorization": "CHG-9"}
    fact = site.call("POST", f"/api/v1/deliveries/{first}/retire", "operator", body=body)
    assert fact.status_code == 200, fact.text
    assert shape(fact.json()) == {**FACT, "performed": "bool"}
    retired = site.call("GET", f"/api/v1/deliveries/{first}/inspect", "viewer").json()
    assert same(retired, {**RETIRED, "wait": None, "suspension": suspended["suspension"]})


def test_a_live_runners_row_keeps_its_shape(site: Site) -> None:
    site.host.runner_heartbeat("a", time.time())
    (row,) = site.host.runners()
    assert same(
        row.to_json(),
        {
            "name": "str",
            "host": "str",
            "pid": "int",
            "started": "str",
            "heartbeat": "str",
            "deliveries": [],
            "age_s": "float",
        },
    )
    site.host.runner_gone("a")
    assert site.host.runners() == []
