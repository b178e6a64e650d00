"""A private PostgreSQL cluster for one test: initdb in a temporary folder, its own port.

A test that restarts "the server" must not disturb the machine's own cluster,
which other tests share. This one is made with the server binaries the machine
has (``EXECSYS_TEST_PG_BIN``, else Debian's ``/usr/lib/postgresql/*/bin``), run as
the ``postgres`` OS user when the tests run as root (the server refuses root).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from glob import glob
from pathlib import Path

import psycopg
import pytest


def _bin_dir() -> Path | None:
    named = os.environ.get("EXECSYS_TEST_PG_BIN")
    candidates = [named] if named else sorted(glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for folder in candidates:
        if folder and (Path(folder) / "initdb").exists():
            return Path(folder)
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    """A stopped-or-running server on 127.0.0.1:``port`` with trust auth, user ``execsys``."""

    def __init__(self, bin_dir: Path, folder: Path, as_user: list[str]) -> None:
        self.bin = bin_dir
        self.folder = folder
        self.data = folder / "data"
        self.as_user = as_user
        self.port = _free_port()
        self.url = f"postgresql://execsys@127.0.0.1:{self.port}/execsys"

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            [*self.as_user, str(self.bin / tool), *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (tool, done.stdout, done.stderr)

    def init(self) -> None:
        """Create the cluster and its ``execsys`` database, and start it."""
        self._run("initdb", "-D", str(self.data), "-U", "execsys", "-A", "trust", "-E", "UTF8")
        self.start()
        with psycopg.connect(self.url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE execsys")

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1"
        log = str(self.folder / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast`` ends every session at once)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")


@contextlib.contextmanager
def private_cluster() -> Iterator[Cluster]:
    """A running private cluster, removed afterwards; skips the test when none can be made."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server binaries (set EXECSYS_TEST_PG_BIN)")
    as_user: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="execsys-pg-"))
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run a server as")
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    cluster = Cluster(bin_dir, folder, as_user)
    try:
        cluster.init()
        yield cluster
    finally:
        with contextlib.suppress(AssertionError, subprocess.SubprocessError):
            cluster.stop("immediate")
        shutil.rmtree(folder, ignore_errors=True)
