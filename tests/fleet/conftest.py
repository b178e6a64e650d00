"""A fleet scenario's folder: the spec, its executor bindings, a turn log, a store URL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
EXECSYS = str(Path(sys.executable).with_name("execsys"))


class Fleet:
    """One scenario: its root folder (the cwd of every process) and its store."""

    def __init__(self, root: Path, store: str) -> None:
        self.root = root
        self.store = store
        root.mkdir(parents=True, exist_ok=True)
        step = HERE / "agents" / "step.py"
        (root / "execsys.yaml").write_text(
            f"executors:\n  worker: {{command: [{sys.executable}, {step}]}}\n"
        )
        (root / "spec.yaml").write_text((HERE / "spec.yaml").read_text())
        self.log = root / "turns.log"
        self.release = root / "release"
        self.extra_env: dict[str, str] = {}
        """Set for every process started from here on (a fault to inject, say)."""

    def env(self) -> dict[str, str]:
        """The environment of every process of the scenario."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXECSYS_")}
        env["EXECSYS_TEST_LOG"] = str(self.log)
        env["EXECSYS_TEST_RELEASE"] = str(self.release)
        env["EXECSYS_STORE"] = self.store
        env.update(self.extra_env)
        return env

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run one ``execsys`` command to its end."""
        return subprocess.run(
            [EXECSYS, *args],
            env=self.env(),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def submit(self, n: int) -> str:
        """Queue one delivery; its id."""
        (self.root / f"in-{n}.json").write_text(json.dumps({"n": n}))
        done = self.cli("submit", "spec.yaml", "--input", f"in-{n}.json", "--json")
        assert done.returncode == 0, done.stderr
        return str(json.loads(done.stdout)["delivery"])

    def serve(self, name: str, *extra: str) -> subprocess.Popen[str]:
        """Start a runner (stdout and stderr to files in the root)."""
        with (
            (self.root / f"{name}.out").open("w") as out,
            (self.root / f"{name}.err").open("w") as err,
        ):
            return subprocess.Popen(
                [EXECSYS, "serve", "--name", name, *extra],
                env=self.env(),
                cwd=self.root,
                stdout=out,
                stderr=err,
                text=True,
            )

    def turns(self) -> Counter[tuple[str, ...]]:
        """How many times each (delivery, node, activation, attempt, turn) ran."""
        if not self.log.exists():
            return Counter()
        return Counter(tuple(line.split()) for line in self.log.read_text().splitlines())

    def statuses(self) -> dict[str, str]:
        """Every delivery's status."""
        done = self.cli("status", "--json")
        assert done.returncode == 0, done.stderr
        return {r["delivery"]: r["status"] for r in json.loads(done.stdout)["deliveries"]}


@pytest.fixture(params=["sqlite", "postgres"])
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fleet]:
    """A scenario on a fresh SQLite file, then on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield Fleet(tmp_path / "root", f"sqlite:///{tmp_path / 'state.db'}")
        return
    from tests.postgres.conftest import SERVER, create_database, drop_database

    if not SERVER:
        pytest.skip("EXECSYS_TEST_POSTGRES is not set")
    url = create_database()
    try:
        yield Fleet(tmp_path / "root", url)
    finally:
        drop_database(url)


def wait_until(check: Callable[[], bool], *, timeout: float = 120.0, what: str = "") -> None:
    """Poll ``check`` until it holds; fail the test if it does not within ``timeout``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out waiting for {what or check}")
        time.sleep(0.1)


def stopped(process: subprocess.Popen[str], timeout: float = 120.0) -> int:
    """SIGTERM a runner and return its exit status."""
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=timeout)
