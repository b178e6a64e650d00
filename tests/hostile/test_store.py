"""Careless store URLs and damaged store files: one coded line, and reading creates nothing."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from execution_system.cli import main
from tests.hostile.helpers import EXECSYS, execsys, one_action


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture(scope="module")
def good_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store holding one completed delivery: (store file, delivery id)."""
    folder = tmp_path_factory.mktemp("good")
    one_action(folder)
    done = execsys("run", "spec.yaml", "--store", "sqlite:///s.db", "--json", cwd=folder)
    assert done.code == 0, done.err
    return folder / "s.db", str(done.json()["delivery"])


READING = [
    ["status"],
    ["status", "DELIVERY"],
    ["inspect", "DELIVERY"],
    ["journal", "verify", "DELIVERY"],
    ["journal", "export", "DELIVERY"],
    ["journal", "export", "DELIVERY", "--bundle"],
    ["journal", "audit", "DELIVERY"],
    ["watch", "DELIVERY"],
]

ACTING = [
    ["stop", "DELIVERY"],
    ["recover", "DELIVERY", "--directive", "continue", "--reason", "r"],
    ["retire", "DELIVERY", "--authorization", "a-1"],
    ["input", "DELIVERY", "--correlation", "c-1", "--response", "ANSWER"],
    ["resolve", "DELIVERY", "--node", "n", "--actor", "a", "--role", "r", "--result", "ANSWER"],
    ["goal", "status", "DELIVERY"],
    ["goal", "export", "DELIVERY"],
    ["goal", "audit", "DELIVERY"],
    ["goal", "apply", "DELIVERY", "--to", "FOLDER"],
]
"""Commands that write to a store but only act on a delivery already in it."""


def _not_found(store: Path) -> str:
    """The one line a command prints for a store file that does not exist."""
    return (
        f"execsys: STORE_NOT_FOUND at {store}: no store here (expected a store created by "
        "'execsys run', 'execsys submit' or 'execsys goal create' "
        "(check --store and EXECSYS_STORE))"
    )


def _reading(command: list[str], delivery: str) -> list[str]:
    return [delivery if word == "DELIVERY" else word for word in command]


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("", "the store URL is empty"),
        ("sqlite:///:memory:", "in-memory database"),
        ("sqlite:///state.db?mode=ro", "has a query or fragment"),
        ("mysql://db/x", "unknown store URL scheme 'mysql'"),
        ("state.db", "is not a URL"),
        ("sqlite://state.db", "is not sqlite:///PATH"),
        ("postgresql://", "names no server or database"),
        ("postgresql://u@localhost:notaport/d", "has port 'notaport', not a number"),
        ("postgresql://u@localhost:99999/d", "has port '99999', not a number"),
        ("postgresql://u:secret@localhost:x/d", "'postgresql://u:***@localhost:x/d' has port"),
        ("postgresql://u@localhost/d?execsys_prepare=maybe", "execsys_prepare='maybe'; use on"),
    ],
)
@pytest.mark.parametrize("command", [["status"], ["inspect", "d-x"], ["stop", "d-x"]])
def test_a_careless_store_url_is_refused_and_creates_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    url: str,
    fragment: str,
    command: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EXECSYS_STORE", raising=False)
    assert main([*command, "--store", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("execsys: STORE_URL_INVALID at store: "), err
    assert "Value error" not in err, "the validator's words, not pydantic's"
    assert fragment in err
    assert _tree(tmp_path) == set()


def test_run_refuses_a_careless_store_url_before_admitting(tmp_path: Path) -> None:
    one_action(tmp_path)
    before = _tree(tmp_path)
    done = execsys("run", "spec.yaml", "--store", "sqlite:///:memory:", cwd=tmp_path)
    assert done.code == 2
    assert done.line.startswith("execsys: STORE_URL_INVALID at store: ")
    assert _tree(tmp_path) == before  # no file named ':memory:', no .execsys/


@pytest.mark.parametrize("command", READING, ids=" ".join)
def test_a_reading_command_on_a_mistyped_path_creates_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    done = execsys(*_reading(command, "d-x"), "--store", "sqlite:///typo/stat.db", cwd=tmp_path)
    assert done.code == 1
    assert done.line == _not_found(tmp_path / "typo" / "stat.db")
    assert _tree(tmp_path) == set()


@pytest.mark.parametrize("command", ACTING, ids=" ".join)
def test_a_command_acting_on_a_delivery_refuses_a_mistyped_path_and_creates_nothing(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, command: list[str]
) -> None:
    answer = tmp_path_factory.mktemp("answer") / "answer.json"
    answer.write_text("{}")
    given = {"ANSWER": str(answer), "FOLDER": str(answer.parent)}
    words = [given.get(word, word) for word in _reading(command, "d-x")]
    done = execsys(*words, "--store", "sqlite:///typo/stat.db", cwd=tmp_path)
    assert done.code == 1
    assert done.line == _not_found(tmp_path / "typo" / "stat.db")
    assert _tree(tmp_path) == set()


def _damage(kind: str, good: Path, target: Path) -> None:
    if kind == "directory":
        target.mkdir()
        return
    if kind == "not-sqlite":
        target.write_text("hello, I am not a database\n")
        return
    data = bytearray(good.read_bytes())
    if kind == "truncated":
        data = data[:3000]
    elif kind == "header-corrupted":
        data[100:4096] = b"\xa5" * (4096 - 100)
    elif kind == "pages-corrupted":  # the header page is intact: damage shows on reading
        data[4096:] = b"\xa5" * (len(data) - 4096)
    target.write_bytes(bytes(data))


DAMAGE = ["directory", "not-sqlite", "truncated", "header-corrupted", "pages-corrupted"]


@pytest.mark.parametrize("kind", DAMAGE)
@pytest.mark.parametrize("command", [*READING, ["run", "spec.yaml"]], ids=" ".join)
def test_a_damaged_store_is_one_coded_line(
    tmp_path: Path, good_store: tuple[Path, str], kind: str, command: list[str]
) -> None:
    good, delivery = good_store
    one_action(tmp_path)
    _damage(kind, good, tmp_path / "s.db")
    done = execsys(*_reading(command, delivery), "--store", "sqlite:///s.db", cwd=tmp_path)
    assert done.code == 1, done.err
    assert done.line.startswith(f"execsys: STORE_UNREADABLE at {tmp_path}/s.db: "), done.err


def _as_other_user() -> list[str]:
    """A command prefix that runs as a user who may not write the store (or a skip)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a store read-only")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture
def read_only_store(good_store: tuple[Path, str]) -> Iterator[tuple[Path, str]]:
    good, delivery = good_store
    # Outside pytest's root-only temp tree, so another user can reach it.
    folder = Path(tempfile.mkdtemp(prefix="execsys-ro-"))
    try:
        shutil.copy(good, folder / "s.db")
        (folder / "s.db").chmod(0o444)
        folder.chmod(0o555)
        yield folder / "s.db", delivery
    finally:
        folder.chmod(stat.S_IRWXU)
        shutil.rmtree(folder)


@pytest.mark.parametrize("command", READING, ids=" ".join)
def test_a_read_only_store_is_inspectable(
    read_only_store: tuple[Path, str], command: list[str]
) -> None:
    store, delivery = read_only_store
    prefix = _as_other_user()
    before = _tree(store.parent)
    done = subprocess.run(
        [*prefix, EXECSYS, *_reading(command, delivery), "--store", f"sqlite:///{store}"],
        cwd=store.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert _tree(store.parent) == before


def test_a_writing_command_on_a_read_only_store_says_so(
    read_only_store: tuple[Path, str],
) -> None:
    store, delivery = read_only_store
    done = subprocess.run(
        [*_as_other_user(), EXECSYS, "stop", delivery, "--store", f"sqlite:///{store}"],
        cwd=store.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith(f"execsys: STORE_READ_ONLY at {store}: "), done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_a_store_failure_found_after_opening_is_one_coded_line(
    tmp_path: Path, good_store: tuple[Path, str]
) -> None:
    # The goal table replaced by one of another shape: opening succeeds, reading it fails.
    import sqlite3

    shutil.copy(good_store[0], tmp_path / "s.db")
    with sqlite3.connect(tmp_path / "s.db") as db:
        db.execute("DROP TABLE IF EXISTS execsys_goals")
        db.execute("CREATE TABLE execsys_goals (other TEXT)")
    done = execsys("goal", "status", "--store", "sqlite:///s.db", cwd=tmp_path)
    assert done.code == 1, done.err
    assert done.line.startswith(f"execsys: STORE_ERROR at {tmp_path}/s.db: "), done.err
    assert "no such column" in done.line and "Traceback" not in done.err
