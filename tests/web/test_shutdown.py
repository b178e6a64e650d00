"""``execsys web`` shut down while a request drives a delivery through a long turn.

With no runner serving the store, the web process drives what a request asks
for itself. SIGTERM stops that delivery at a safe boundary (the turn ends, the
node is halted and journaled), the request answers with the ``stopped``
status, and the server goes down without waiting for the turn.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tests.web.conftest import ROOT
from tests.web.test_browser import CRASH_SPEC, _port

EXECSYS = str(Path(sys.executable).with_name("execsys"))


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXECSYS, *args, "--store", f"sqlite:///{tmp_path / 'state.db'}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )


def _started(tmp_path: Path) -> bool:
    """Whether the delivery's 'work' turn has begun (its journal says so)."""
    listed = json.loads(_cli(tmp_path, "status", "--json").stdout)["deliveries"]
    if not listed:
        return False
    exported = _cli(tmp_path, "journal", "export", listed[0]["delivery"]).stdout
    return '"work-started"' in exported


def test_sigterm_stops_a_delivery_a_request_drives_and_the_server_exits(tmp_path: Path) -> None:
    (tmp_path / "execsys.yaml").write_text(
        f"executors:\n  slow: {{python: 'tests.web.agents:slow', path: '{ROOT}'}}\n"
    )
    marker = tmp_path / "hang"
    marker.write_text("")
    port = _port()
    log = (tmp_path / "web.log").open("w")
    web = subprocess.Popen(
        [EXECSYS, "web", "--listen", f"127.0.0.1:{port}",
         "--store", f"sqlite:///{tmp_path / 'state.db'}"],
        stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}/api/v1"
    answered: dict[str, Any] = {}

    def admit() -> None:
        body = {"spec": CRASH_SPEC, "input": {"hang": str(marker)}, "queue": False}
        answered["response"] = httpx.post(base + "/deliveries", json=body, timeout=120)

    request = threading.Thread(target=admit)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/openapi.json", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "web.log").read_text()
            time.sleep(0.1)
        request.start()
        while not _started(tmp_path):  # the request is driving 'work', whose turn hangs
            assert "response" not in answered, answered["response"].text
            assert time.monotonic() < deadline, "the delivery never started"
            time.sleep(0.1)
        time.sleep(0.3)  # into the executor's turn
        web.send_signal(signal.SIGTERM)
        web.wait(timeout=60)
        request.join(timeout=60)
    finally:
        if web.poll() is None:
            web.kill()
            web.wait()
        log.close()
    # uvicorn ends a gracefully stopped server by raising the signal it caught again.
    assert web.returncode == -signal.SIGTERM, (tmp_path / "web.log").read_text()
    response = answered["response"]
    assert response.status_code == 201, response.text
    assert response.json()["status"] == "stopped"
    delivery = response.json()["delivery"]
    exported = _cli(tmp_path, "journal", "export", delivery).stdout.splitlines()
    [halt] = [json.loads(line) for line in exported[1:] if "work-blocked" in line]
    assert halt["error"]["message"] == (
        "stopped by an operator during 'work': the web process received SIGTERM"
    )

    marker.unlink()
    done = _cli(tmp_path, "recover", delivery, "--directive", "continue", "--reason", "go on")
    assert done.returncode == 0, done.stderr
    assert json.loads(_cli(tmp_path, "status", "--json").stdout)["deliveries"][0]["status"] == (
        "completed"
    )
