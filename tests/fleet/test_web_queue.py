"""``execsys web`` beside a fleet: it lists the ``serve`` runners and queues work for them."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.fleet.conftest import EXECSYS, Fleet, stopped, wait_until


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def web(fleet: Fleet) -> Iterator[str]:
    """``execsys web`` on loopback over the fleet's store; its base URL."""
    port = _free_port()
    with (fleet.root / "web.err").open("w") as err:
        server = subprocess.Popen(
            [EXECSYS, "web", "--listen", f"127.0.0.1:{port}"],
            env=fleet.env(),
            cwd=fleet.root,
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )
    base = f"http://127.0.0.1:{port}/api/v1"

    def up() -> bool:
        assert server.poll() is None, (fleet.root / "web.err").read_text()
        try:
            return httpx.get(f"{base}/runners", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(up, what="the web server")
        yield base
    finally:
        stopped(server)


def _admit(fleet: Fleet, base: str, n: int, **extra: object) -> dict[str, object]:
    spec = yaml.safe_load((fleet.root / "spec.yaml").read_text())
    sent = httpx.post(f"{base}/deliveries", json={"spec": spec, "input": {"n": n}, **extra})
    assert sent.status_code == 201, sent.text
    document: dict[str, object] = sent.json()
    return document


def test_web_queues_for_a_live_runner_and_runs_inline_without_one(
    fleet: Fleet, web: str, tmp_path: Path
) -> None:
    fleet.release.touch()  # no step waits
    alone = _admit(fleet, web, 1)
    assert alone["status"] == "completed"  # no runner serves the store: the server drives it
    [own] = httpx.get(f"{web}/runners").json()["runners"]
    assert own["kind"] == "web"

    runner = fleet.serve("a")
    try:
        wait_until(
            lambda: any(r["name"] == "a" for r in httpx.get(f"{web}/runners").json()["runners"]),
            what="the runner listed",
        )
        [row] = [r for r in httpx.get(f"{web}/runners").json()["runners"] if r["kind"] == "serve"]
        assert (row["name"], row["pid"], row["alive"]) == ("a", runner.pid, True)
        queued = _admit(fleet, web, 2)
        assert queued["status"] in {"queued", "running", "completed"}
        delivery = str(queued["delivery"])
        wait_until(lambda: fleet.statuses()[delivery] == "completed", what="the runner's drive")
        here = _admit(fleet, web, 3, queue=False)  # the request's own choice wins
        assert here["status"] == "completed"
    finally:
        assert stopped(runner) == 0, (fleet.root / "a.err").read_text()
    out = (fleet.root / "a.out").read_text()
    assert f"{delivery}: completed" in out and str(here["delivery"]) not in out
    assert set(fleet.turns().values()) == {1}
    metrics = httpx.get(web.removesuffix("/api/v1") + "/metrics").text
    assert "execsys_runners_alive" in metrics
    assert json.loads(fleet.cli("runners", "--json").stdout)["runners"] == []
