"""``GET /events``, ``execsys watch`` and ``GET /metrics``."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from execution_system.web import ChangeFeed, create_app
from tests.web.conftest import EXECUTORS, Site

EXECSYS = str(Path(sys.executable).with_name("execsys"))


def test_the_feed_reports_changes_relative_to_subscribing() -> None:
    rows = [{"delivery": "d-1", "graph": "g", "status": "running", "outcome": None, "changed": 1.0}]
    asked: list[float | None] = []

    def listing(since: float | None) -> list[dict[str, object]]:
        asked.append(since)
        return [dict(r) for r in rows if since is None or float(r["changed"]) >= since]

    feed = ChangeFeed(listing)

    async def main() -> list[dict[str, object]]:
        stream = feed.subscribe()
        first = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0)
        rows[0].update(status="waiting", changed=2.0)
        feed.poke()
        got = [await first]
        rows.append(
            {"delivery": "d-2", "graph": "g", "status": "queued", "outcome": None, "changed": 9.0}
        )
        feed.poke()
        got.append(await anext(stream))
        await stream.aclose()
        await feed.close()
        return got

    changes = asyncio.run(main())
    assert [(c["delivery"], c["status"], c["previous"]) for c in changes] == [
        ("d-1", "waiting", "running"),
        ("d-2", "queued", None),
    ]
    assert feed.subscribers == 0
    # After the baseline, only recent rows are asked for (a window behind the newest change).
    assert asked[0] is None and all(a is not None and a >= 1.0 - 2.0 for a in asked[1:])


def test_a_new_subscriber_after_a_gap_catches_up_without_rereading_everything() -> None:
    rows = [{"delivery": "d-1", "graph": "g", "status": "running", "outcome": None, "changed": 5.0}]
    asked: list[float | None] = []

    def listing(since: float | None) -> list[dict[str, object]]:
        asked.append(since)
        return [dict(r) for r in rows if since is None or float(r["changed"]) >= since]

    feed = ChangeFeed(listing, interval_s=0.01)

    async def one_change() -> dict[str, object]:
        stream = feed.subscribe()
        first = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0)
        rows[0].update(status="failed", changed=float(rows[0]["changed"]) + 10)
        feed.poke()
        change = await first
        await stream.aclose()
        for _ in range(6000):  # until the poller noticed nobody listens and stopped
            if feed._task is None:
                break
            await asyncio.sleep(0.01)
        return change

    async def main() -> list[dict[str, object]]:
        got = [await one_change()]
        rows[0].update(status="waiting", changed=30.0)  # while nobody listens
        rows[0]["status"] = "running"
        got.append(await one_change())
        await feed.close()
        return got

    first, second = asyncio.run(main())
    assert (first["status"], first["previous"]) == ("failed", "running")
    # The gap's change is not sent; the next one names the status seen at resubscribing.
    assert (second["status"], second["previous"]) == ("failed", "running")
    assert asked.count(None) == 1  # one full listing, ever


def test_events_stream_a_status_change_made_through_the_api(site: Site) -> None:
    did = site.secrets["first"]
    correlation = site.host.status(did).suspension.correlation

    async def main() -> str:
        transport = httpx.ASGITransport(app=site.app)
        headers = {"Authorization": f"Bearer {site.secrets['viewer']}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            stream = asyncio.ensure_future(
                client.get(f"/api/v1/events?delivery={did}&max_events=1", headers=headers)
            )
            for _ in range(6000):  # until the stream has subscribed (bounded by the timeout)
                if site.app.state.web.feed.subscribers:
                    break
                await asyncio.sleep(0.01)
            agent = {"Authorization": f"Bearer {site.secrets['agent']}"}
            body = {"correlation": correlation, "response": "red"}
            answered = await client.post(
                f"/api/v1/deliveries/{did}/input", json=body, headers=agent
            )
            assert answered.status_code == 200, answered.text
            response = await stream
            assert response.headers["content-type"].startswith("text/event-stream")
            return response.text

    text = asyncio.run(main())
    data = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    assert len(data) == 1
    change = json.loads(data[0])
    # The answer moves the delivery suspended -> running -> waiting; a poll of the feed
    # may land while it runs, so the first change sent is either step out of suspended.
    assert (change["delivery"], change["previous"]) == (did, "suspended")
    assert change["status"] in {"running", "waiting"}


def test_events_are_refused_without_a_token_or_out_of_scope(site: Site) -> None:
    assert site.call("GET", "/api/v1/events").status_code == 401
    other = site.start()
    refused = site.call("GET", f"/api/v1/events?delivery={other}", "agent")
    assert refused.status_code == 403
    assert site.call("GET", "/api/v1/events", "agent").status_code == 403


def test_metrics_on_loopback_need_no_token(site: Site) -> None:
    site.waiting()
    site.call("GET", "/api/v1/deliveries", "viewer")
    text = site.call("GET", "/metrics").text
    assert 'execsys_deliveries{status="suspended"} 1.0' in text
    assert 'execsys_deliveries{status="waiting"} 1.0' in text
    assert 'execsys_http_requests_total{route="list",status="200"} 1.0' in text
    assert "execsys_http_request_seconds_bucket" in text
    assert "execsys_runners_alive 1.0" in text


def test_metrics_beyond_loopback_need_a_token(site: Site) -> None:
    site.app = create_app(site.host, tokens=site.tokens, executors=EXECUTORS, loopback=False)
    assert site.call("GET", "/metrics").status_code == 401
    assert site.call("GET", "/metrics", "viewer").status_code == 200


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_watch_follows_a_delivery_another_process_drives(site: Site, tmp_path: Path) -> None:
    did = site.waiting()
    store = f"sqlite:///{tmp_path / 'state.db'}"
    watch = subprocess.Popen(
        [EXECSYS, "watch", did, "--store", store, "--json", "--interval", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        assert watch.stdout is not None
        first = json.loads(watch.stdout.readline())
        assert first["status"] == "waiting"
        result = tmp_path / "approve.json"
        result.write_text('{"approved": true}')
        resolved = subprocess.run(
            [
                EXECSYS,
                "resolve",
                did,
                "--node",
                "signoff",
                "--actor",
                "alice",
                "--role",
                "maintainer",
                "--result",
                str(result),
                "--store",
                store,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert resolved.returncode == 0, resolved.stderr
        out, err = watch.communicate(timeout=60)
    finally:
        watch.kill()
    assert watch.returncode == 0, err
    statuses = [json.loads(line)["status"] for line in out.splitlines()]
    assert statuses[-1] == "completed"
