"""The console in headless Chromium against a real ``execsys web`` process.

Skipped when Chromium or Playwright is absent locally; required in CI (CI=true).
Screenshots go to EXECSYS_SCREENSHOTS (default: the test's temporary folder).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.web.conftest import ROOT, make_site

CHROMIUM = "/usr/bin/chromium"
EXECSYS = str(Path(sys.executable).with_name("execsys"))
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _need_browser() -> Any:
    missing = []
    if not Path(CHROMIUM).exists():
        missing.append(f"{CHROMIUM} (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing.append("playwright (pip install -e '.[dev]')")
        sync_playwright = None
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail("browser tests are required in CI; missing: " + ", ".join(missing))
        pytest.skip("browser tests need " + ", ".join(missing))
    return sync_playwright


CRASH_SPEC = {
    "spec": "execution-system/v1",
    "graph": "crashable",
    "input": {"type": "object", "properties": {"hang": {"type": "string"}}, "required": ["hang"]},
    "start": "work",
    "nodes": {
        "work": {
            "kind": "action",
            "executor": "slow",
            "inputs": {"hang": "input.hang"},
            "outputs": {"done": {"type": "boolean"}},
            "next": "done",
        },
        "done": {"kind": "terminal", "outcome": "succeeded"},
    },
}


def _crashed_delivery(tmp: Path, store: str) -> str:
    """Run a delivery in its own process and SIGKILL it in the middle of a step."""
    marker = tmp / "hang"
    marker.write_text("")
    (tmp / "crash.json").write_text(json.dumps(CRASH_SPEC))
    (tmp / "crash-input.json").write_text(json.dumps({"hang": str(marker)}))
    (tmp / "crash.yaml").write_text(
        f"executors:\n  slow: {{python: 'tests.web.agents:slow', path: '{ROOT}'}}\n"
    )
    run = subprocess.Popen(
        [
            EXECSYS,
            "run",
            str(tmp / "crash.json"),
            "--input",
            str(tmp / "crash-input.json"),
            "--config",
            str(tmp / "crash.yaml"),
            "--store",
            store,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            listed = subprocess.run(
                [EXECSYS, "status", "--store", store, "--json"],
                capture_output=True,
                text=True,
                check=False,
            )
            rows = [r for r in json.loads(listed.stdout)["deliveries"] if r["graph"] == "crashable"]
            if rows and rows[0]["status"] == "running":
                break
            time.sleep(0.1)
        else:
            pytest.fail("the crashable delivery never started")
        time.sleep(0.3)  # let it enter the executor
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    marker.unlink()
    return str(rows[0]["delivery"])


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[dict[str, Any]]:
    _need_browser()
    site = make_site(tmp_path)
    waiting = site.waiting()
    live = site.waiting()
    secrets = dict(site.secrets)
    site.runner.close()
    store = f"sqlite:///{tmp_path / 'state.db'}"
    crashed = _crashed_delivery(tmp_path, store)
    port = _port()
    log = (tmp_path / "web.log").open("w")
    process = subprocess.Popen(
        [
            EXECSYS,
            "web",
            "--listen",
            f"127.0.0.1:{port}",
            "--tokens",
            str(site.tokens_path),
            "--store",
            store,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(base + "/api/v1/openapi.json", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            pytest.fail("execsys web did not start: " + (tmp_path / "web.log").read_text())
        yield {
            "base": base,
            "secrets": secrets,
            "question": secrets["first"],
            "waiting": waiting,
            "live": live,
            "crashed": crashed,
            "shots": Path(os.environ.get("EXECSYS_SCREENSHOTS") or tmp_path / "screenshots"),
        }
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _login(browser: Any, base: str, token: str) -> Any:
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(base + "/login")
    page.fill("input[name=token]", token)
    page.click("button[type=submit]")
    page.wait_for_url(base + "/")
    return page


@pytest.mark.slow
def test_the_console_in_a_browser(server: dict[str, Any]) -> None:
    sync_playwright = _need_browser()
    base, secrets = server["base"], server["secrets"]
    shots: Path = server["shots"]
    shots.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            # An operator sees the crashed delivery on top and continues it with a reason.
            operator = _login(browser, base, secrets["operator"])
            operator.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            assert "Needs a directive" in operator.inner_text("main")
            assert server["crashed"] in operator.inner_text("section.attention")
            operator.screenshot(path=str(shots / "console-deliveries.png"), full_page=True)
            operator.goto(f"{base}/deliveries/{server['crashed']}")
            operator.select_option("select[name=directive]", "continue")
            operator.fill("input[name=reason]", "the runner was killed; the step is idempotent")
            operator.click("section.directives button[type=submit]")
            assert "Confirm: continue" in operator.inner_text("h1")
            operator.click("button.danger")
            operator.wait_for_selector("p.notice")
            assert "completed" in operator.inner_text("p.summary")

            # An agent answers its question.
            agent = _login(browser, base, secrets["agent"])
            agent.goto(f"{base}/deliveries/{server['question']}")
            assert "which colour?" in agent.inner_text("section.question")
            agent.fill("textarea[name=response]", '"green"')
            agent.click("section.question button[type=submit]")
            agent.wait_for_selector("p.notice")
            assert "waiting" in agent.inner_text("p.summary")

            # An approver sees the graph and approves the wait as its actor.
            approver = _login(browser, base, secrets["approver"])
            approver.goto(f"{base}/deliveries/{server['waiting']}")
            assert approver.locator("svg.graph g.node").count() == 3
            approver.screenshot(path=str(shots / "console-delivery.png"), full_page=True)
            approver.click("section.wait button[type=submit]")
            approver.wait_for_selector("p.notice")
            assert "completed" in approver.inner_text("p.summary")
            timeline = approver.inner_text("section.timeline")
            assert "alice" in timeline

            # A viewer has no forms, and a forged post is refused.
            viewer = _login(browser, base, secrets["viewer"])
            viewer.goto(f"{base}/deliveries/{server['live']}")
            assert viewer.locator("section.wait form").count() == 0
            csrf = viewer.get_attribute("input[name=csrf]", "value")
            refused = viewer.request.post(
                f"{base}/deliveries/{server['live']}/resolve",
                form={
                    "csrf": csrf or "",
                    "node": "signoff",
                    "role": "maintainer",
                    "result": '{"approved": true}',
                },
            )
            assert refused.status == 403 and "AUTH_FORBIDDEN" in refused.text()

            # The viewer's page follows a change made elsewhere (through the API).
            stop = httpx.post(
                f"{base}/api/v1/deliveries/{server['live']}/stop",
                json={},
                headers={"Authorization": f"Bearer {secrets['operator']}"},
                timeout=60,
            )
            assert stop.status_code == 200, stop.text
            # (wait_for_function would need 'unsafe-eval', which the page's CSP refuses)
            viewer.wait_for_selector("p.summary:has-text('stopped')", timeout=20_000)
        finally:
            browser.close()
    # No CSP violation or script error on any page.
    assert not [e for e in errors if re.search("Content Security Policy|Uncaught", e)], errors
    assert (shots / "console-delivery.png").stat().st_size > 0
