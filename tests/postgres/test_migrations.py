"""Migrations and the store's bad inputs, through ``execsys store migrate`` (real processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg.rows import dict_row

from contracts import ErrorCode, ExecsysError
from host.storage.postgres import MIGRATIONS, SCHEMA_VERSION, connect, require_current

EXECSYS = str(Path(sys.executable).with_name("execsys"))


def execsys(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "EXECSYS_STORE"}
    return subprocess.run(
        [EXECSYS, *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def query(url: str, sql: str) -> list[dict[str, Any]]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        return list(conn.execute(sql.encode()).fetchall())


def tables(url: str) -> set[str]:
    rows = query(
        url, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    )
    return {r["table_name"] for r in rows}


def schema_shape(url: str) -> list[tuple[Any, ...]]:
    rows = query(
        url,
        "SELECT table_name, column_name, data_type, is_nullable, column_default "
        "FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2",
    )
    indexes = query(
        url, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1"
    )
    return [tuple(r.values()) for r in rows] + [tuple(r.values()) for r in indexes]


def one_coded_line(proc: subprocess.CompletedProcess[str], code: str, status: int) -> None:
    assert proc.returncode == status, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"execsys: {code} at "), lines[0]
    assert "Traceback" not in proc.stderr


def test_migrate_creates_the_schema_once_and_reports_it(pg_url: str) -> None:
    first = execsys("store", "migrate", "--store", pg_url, "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["from"] == 0
    assert json.loads(first.stdout)["to"] == SCHEMA_VERSION
    again = execsys("store", "migrate", "--store", pg_url, "--json")
    assert json.loads(again.stdout)["from"] == SCHEMA_VERSION
    applied = query(pg_url, "SELECT version FROM execsys_schema ORDER BY 1")
    assert [r["version"] for r in applied] == [m.version for m in MIGRATIONS]
    assert {"checkpoints", "checkpoint_blobs", "execsys_leases"} <= tables(pg_url)
    assert "execsys_queue" not in tables(pg_url), "queued work lives in the status row"
    with connect(pg_url) as conn:
        require_current(conn, pg_url)


def test_migrations_are_numbered_without_gaps() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))


def test_a_store_migrated_step_by_step_equals_a_fresh_one(pg_url: str) -> None:
    from tests.postgres.conftest import admin, database_url

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE execsys_schema (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
            "applied TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())"
        )
        conn.execute(MIGRATIONS[0].sql.encode())
        conn.execute("INSERT INTO execsys_schema (version, name) VALUES (1, 'x')")
    stepwise = execsys("store", "migrate", "--store", pg_url, "--json")
    assert json.loads(stepwise.stdout)["from"] == 1
    name = urlsplit(pg_url).path.strip("/") + "_fresh"
    admin(f'CREATE DATABASE "{name}" TEMPLATE template0')
    try:
        fresh = database_url(name)
        assert execsys("store", "migrate", "--store", fresh).returncode == 0
        assert schema_shape(fresh) == schema_shape(pg_url)
    finally:
        admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_concurrent_migrators_apply_each_step_once(pg_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "EXECSYS_STORE"}
    procs = [
        subprocess.Popen(
            [EXECSYS, "store", "migrate", "--store", pg_url],
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(3)
    ]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    applied = query(pg_url, "SELECT version FROM execsys_schema ORDER BY 1")
    assert [r["version"] for r in applied] == [m.version for m in MIGRATIONS]


def test_a_database_of_another_application_is_refused_and_left_alone(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    proc = execsys("store", "migrate", "--store", pg_url)
    one_coded_line(proc, "STORE_FOREIGN", 1)
    assert tables(pg_url) == {"invoices"}


def test_a_newer_schema_is_refused_and_left_alone(pg_url: str) -> None:
    assert execsys("store", "migrate", "--store", pg_url).returncode == 0
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO execsys_schema (version, name) VALUES (%s, 'future')",
            (SCHEMA_VERSION + 1,),
        )
    before = schema_shape(pg_url)
    proc = execsys("store", "migrate", "--store", pg_url)
    one_coded_line(proc, "STORE_SCHEMA_NEWER", 1)
    assert schema_shape(pg_url) == before
    with connect(pg_url) as conn, pytest.raises(ExecsysError) as caught:
        require_current(conn, pg_url)
    assert caught.value.code is ErrorCode.STORE_SCHEMA_NEWER


def test_an_empty_database_is_not_a_store_for_reading(pg_url: str) -> None:
    with connect(pg_url) as conn, pytest.raises(ExecsysError) as caught:
        require_current(conn, pg_url)
    assert caught.value.code is ErrorCode.STORE_NOT_MIGRATED
    assert tables(pg_url) == set()


def _with(url: str, **parts: str) -> str:
    split = urlsplit(url)
    user = parts.get("user", split.username or "")
    password = parts.get("password", split.password or "")
    host = parts.get("host", split.hostname or "localhost")
    port = parts.get("port", str(split.port or 5432))
    db = parts.get("db", split.path.strip("/"))
    return urlunsplit(split._replace(netloc=f"{user}:{password}@{host}:{port}", path=f"/{db}"))


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"password": "not-the-password"}, "STORE_AUTH_FAILED"),
        ({"port": "1"}, "STORE_UNREACHABLE"),
        ({"db": "execsys_no_such_database"}, "STORE_NOT_FOUND"),
    ],
)
def test_bad_servers_are_one_coded_line_and_hide_the_password(
    pg_url: str, change: dict[str, str], code: str
) -> None:
    url = _with(pg_url, **change)
    proc = execsys("store", "migrate", "--store", url)
    one_coded_line(proc, code, 1)
    password = urlsplit(url).password
    if password:
        assert f":{password}@" not in proc.stderr
        assert ":***@" in proc.stderr
    assert tables(pg_url) == set()


def test_migrate_without_the_substrate_creates_only_host_tables(pg_url: str) -> None:
    from host.storage.postgres import migrate

    assert migrate(pg_url) == (0, SCHEMA_VERSION)
    names = tables(pg_url)
    assert "execsys_leases" in names
    assert not any(n.startswith("checkpoint") for n in names)


def test_a_damaged_store_is_one_coded_line_not_an_internal_error(pg_url: str) -> None:
    assert execsys("store", "migrate", "--store", pg_url).returncode == 0
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE execsys_deliveries")
    proc = execsys("status", "--store", pg_url)
    one_coded_line(proc, "STORE_ERROR", 1)
    assert "execsys_deliveries" in proc.stderr


def test_every_store_connection_notices_a_silent_server_unless_the_url_says_otherwise(
    pg_url: str,
) -> None:
    from host.storage.postgres import PostgresStorage, migrate

    migrate(pg_url)
    store = PostgresStorage.open(pg_url)
    try:
        with store.connection() as conn:
            settings = conn.info.get_parameters()
    finally:
        store.close()
    assert settings["tcp_user_timeout"] == "30000"
    assert (settings["keepalives_idle"], settings["keepalives_count"]) == ("30", "3")
    own = connect(f"{pg_url}?keepalives_idle=7")
    try:
        assert own.info.get_parameters()["keepalives_idle"] == "7", "the URL's value wins"
    finally:
        own.close()
