"""The web layer with a large store: listing and inspect latency, event latency, page render.

1. Populate a store with N deliveries (default 10,000; each a real run to its
   question through the Host) plus one delivery of a 200-node graph.
2. In-process through httpx's ASGITransport (no network): ``GET /api/v1/deliveries``
   (first page) and ``GET /api/v1/deliveries/{id}/inspect`` p50/p99
   (targets: p99 < 50 ms and < 100 ms).
3. Against a real ``execsys web`` process: how long a status change made by another
   process takes to reach an ``/events`` subscriber (target < 1 s).
4. The console page of the 200-node delivery: its server-side parts in-process
   (inspect, graph view, SVG, timeline, the whole page), then headless Chromium
   (/usr/bin/chromium) against a real server: navigation to the load event
   (target < 1 s), split into time to first byte and the browser's layout and
   style work (Chrome DevTools Protocol performance metrics).

Run: ``.venv/bin/python bench/web_bench.py [--deliveries N] [--store DIR]``.
A populated ``--store DIR`` is reused. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from contracts import ScriptedBinding  # noqa: E402
from execution_system import admit, parse_graph  # noqa: E402
from execution_system._compose import open_runner  # noqa: E402
from execution_system.web import create_app  # noqa: E402

EXECSYS = str(Path(sys.executable).with_name("execsys"))
ASK = ScriptedBinding(
    scripted=({"status": "needs-input", "question": {"q": "go?"}, "session": "s"},)
)
DONE = ScriptedBinding(scripted=({"status": "completed", "output": {"ok": True}},))

SMALL = {
    "spec": "execution-system/v1",
    "graph": "bench-small",
    "start": "ask",
    "nodes": {
        "ask": {
            "kind": "action",
            "executor": "ask",
            "outputs": {"ok": {"type": "boolean"}},
            "next": "done",
        },
        "done": {"kind": "terminal", "outcome": "succeeded"},
    },
}


def wide(n: int) -> dict[str, Any]:
    """A 200-node graph: a chain of actions that ends in a wait, then a terminal."""
    nodes: dict[str, Any] = {}
    for i in range(n - 2):
        nodes[f"step_{i:03d}"] = {
            "kind": "action",
            "executor": "done",
            "outputs": {"ok": {"type": "boolean"}},
            "next": f"step_{i + 1:03d}" if i < n - 3 else "approve",
        }
    nodes["approve"] = {
        "kind": "wait",
        "wait": "approval",
        "result": {"type": "object"},
        "authority": {"roles": ["maintainer"]},
        "next": "end",
    }
    nodes["end"] = {"kind": "terminal", "outcome": "succeeded"}
    return {
        "spec": "execution-system/v1",
        "graph": "bench-200",
        "start": "step_000",
        "nodes": nodes,
    }


def populate(store: str, count: int) -> tuple[str, str]:
    runner = open_runner(store)
    host = runner.host
    try:
        have = len(host.deliveries())
        small = parse_graph(SMALL)
        started = time.perf_counter()

        async def fill() -> None:
            for _ in range(max(0, count - have)):
                delivery = admit(small, {}, executors={"ask": ASK}, nonce=uuid.uuid4().hex)
                await host.run(delivery)

        asyncio.run(fill())
        if count > have:
            took = time.perf_counter() - started
            print(
                f"populated {count - have} deliveries in {took:.0f} s "
                f"({1000 * took / (count - have):.1f} ms each)"
            )
        big = [r for r in host.deliveries() if r.graph == "bench-200"]
        if not big:
            delivery = admit(
                parse_graph(wide(200)), {}, executors={"done": DONE}, nonce=uuid.uuid4().hex
            )
            asyncio.run(host.run(delivery))
            big = [r for r in host.deliveries() if r.graph == "bench-200"]
        any_small = next(r.delivery for r in host.deliveries() if r.graph == "bench-small")
        return str(big[0].delivery), str(any_small)
    finally:
        runner.close()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def in_process(store: str, reps: int) -> list[tuple[str, float, float]]:
    runner = open_runner(store)
    app = create_app(runner.host)
    ids = [r.delivery for r in runner.host.deliveries()]

    async def main() -> list[tuple[str, float, float]]:
        transport = httpx.ASGITransport(app=app)
        out = []
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            for name, paths in (
                ("GET /deliveries (first page)", ["/api/v1/deliveries"] * reps),
                (
                    "GET /deliveries/{id}/inspect",
                    [
                        f"/api/v1/deliveries/{ids[(i * 7919) % len(ids)]}/inspect"
                        for i in range(reps)
                    ],
                ),
            ):
                await client.get(paths[0])  # warm
                times = []
                for path in paths:
                    started = time.perf_counter()
                    response = await client.get(path)
                    times.append(time.perf_counter() - started)
                    assert response.status_code == 200, response.text
                out.append((name, 1000 * statistics.median(times), 1000 * _pct(times, 0.99)))
        return out

    try:
        return asyncio.run(main())
    finally:
        runner.close()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def event_latency(store: str, reps: int) -> list[float]:
    """Seconds from a status change (committed by this process) to its SSE event."""
    port = _port()
    server = subprocess.Popen(
        [EXECSYS, "web", "--listen", f"127.0.0.1:{port}", "--store", store],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    latencies = []
    runner = open_runner(store)
    try:
        for _ in range(300):
            try:
                httpx.get(base + "/api/v1/openapi.json", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        small = parse_graph(SMALL)
        for _ in range(reps):
            delivery = admit(small, {}, executors={"ask": ASK}, nonce=uuid.uuid4().hex)
            did = delivery.delivery_id
            with httpx.stream(
                "GET", f"{base}/api/v1/events?delivery={did}&max_events=1", timeout=30
            ) as stream:
                lines = stream.iter_lines()
                next(lines)  # the stream's opening comment: subscribed
                time.sleep(0.3)  # the feed takes its baseline before the change
                asyncio.run(runner.host.run(delivery))
                committed = time.perf_counter()
                for line in lines:
                    if line.startswith("data: "):
                        latencies.append(time.perf_counter() - committed)
                        assert json.loads(line[6:])["delivery"] == did
                        break
    finally:
        runner.close()
        server.terminate()
        server.wait(timeout=30)
    return latencies


def server_render(store: str, delivery: str, reps: int) -> dict[str, list[float]]:
    """In-process: the console page of ``delivery`` and its parts (inspect, graph, SVG)."""
    from execution_system.web._console import timeline
    from execution_system.web._graph import graph_view, render_svg

    runner = open_runner(store)
    host = runner.host
    app = create_app(host)
    parts: dict[str, list[float]] = {"inspect": [], "graph view": [], "svg": [], "timeline": []}
    parts["page (in-process)"] = []

    def timed(name: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        value = call(*args, **kwargs)
        parts[name].append(time.perf_counter() - started)
        return value

    async def pages() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            await client.get(f"/deliveries/{delivery}")
            for _ in range(reps):
                started = time.perf_counter()
                response = await client.get(f"/deliveries/{delivery}")
                parts["page (in-process)"].append(time.perf_counter() - started)
                assert response.status_code == 200

    try:
        for _ in range(reps):
            report = timed("inspect", host.inspect, delivery)
            lines = host.journal_lines(delivery)
            view = timed("graph view", graph_view, host, delivery, states=report.nodes, lines=lines)
            timed("svg", render_svg, view)
            timed("timeline", timeline, lines)
        asyncio.run(pages())
    finally:
        runner.close()
    return parts


FRAME = "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
"""Resolves once the browser has produced a frame of the loaded page."""
NAVIGATION = "JSON.stringify(performance.getEntriesByType('navigation')[0].toJSON())"


def page_render(store: str, delivery: str, reps: int) -> dict[str, list[float]]:
    """Chromium against a real server: load time, and where it goes (server, layout, style)."""
    from playwright.sync_api import sync_playwright

    port = _port()
    server = subprocess.Popen(
        [EXECSYS, "web", "--listen", f"127.0.0.1:{port}", "--store", store],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    found: dict[str, list[float]] = {
        "load event": [],
        "first frame after load": [],
        "server (request to first byte)": [],
        "browser layout": [],
        "browser style": [],
    }
    try:
        for _ in range(300):
            try:
                httpx.get(base + "/api/v1/openapi.json", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path="/usr/bin/chromium",
                args=[
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                ],
            )
            page = browser.new_page()
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable")

            def metrics() -> dict[str, float]:
                sample = cdp.send("Performance.getMetrics")["metrics"]
                return {m["name"]: m["value"] for m in sample}

            page.goto(f"{base}/deliveries/{delivery}")  # warm: session cookie, caches
            for _ in range(reps):
                started = time.perf_counter()
                page.goto(f"{base}/deliveries/{delivery}", wait_until="load")
                found["load event"].append(time.perf_counter() - started)
                page.evaluate(FRAME)
                found["first frame after load"].append(time.perf_counter() - started)
                # The durations are the new document's own (they restart with each one).
                done = metrics()
                nav = json.loads(page.evaluate(NAVIGATION))
                found["server (request to first byte)"].append(
                    (nav["responseStart"] - nav["requestStart"]) / 1000
                )
                found["browser layout"].append(done["LayoutDuration"])
                found["browser style"].append(done["RecalcStyleDuration"])
                assert page.locator("svg.graph g.node").count() == 200
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    return found


def _row(name: str, values: list[float]) -> str:
    return (
        f"{name:<40} {1000 * statistics.median(values):>8.1f}ms "
        f"{1000 * max(values):>8.1f}ms (max of {len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=10_000)
    parser.add_argument("--store", metavar="DIR", help="reuse (or create) the store in DIR")
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--page-reps", type=int, default=20, help="Chromium page loads")
    args = parser.parse_args()
    folder = Path(args.store or tempfile.mkdtemp(prefix="execsys-web-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    store = f"sqlite:///{folder / 'state.db'}"
    big, _ = populate(store, args.deliveries)
    print(f"store {folder}: {args.deliveries} deliveries + one of 200 nodes ({big})")
    print(f"{'measure':<40} {'p50':>10} {'p99':>10}")
    for name, p50, p99 in in_process(store, args.reps):
        print(f"{name:<40} {p50:>8.1f}ms {p99:>8.1f}ms")
    events = event_latency(store, 10)
    print(
        f"{'status change -> /events subscriber':<40} {1000 * statistics.median(events):>8.0f}ms "
        f"{1000 * max(events):>8.0f}ms (max of {len(events)})"
    )
    print("console page of the 200-node delivery:")
    for name, values in server_render(store, big, 20).items():
        print(_row(f"  server: {name}", values))
    for name, values in page_render(store, big, args.page_reps).items():
        print(_row(f"  chromium: {name}", values))


if __name__ == "__main__":
    main()
