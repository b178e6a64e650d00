"""Closed Host selection: exact configuration, no fallback, creation failure publishes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contracts import ErrorCode, ExecsysError, LangGraphHostConfig
from contracts._config import store_url_problem
from host.storage.postgres._connect import conninfo, prepares
from runner import RunnerFactory, parse_factory_config
from tests.support.memory_custody import MemoryCustody


@pytest.mark.parametrize(
    ("document", "code"),
    [
        ({"engine": "temporal"}, ErrorCode.ENGINE_UNKNOWN),
        ({"engine": None}, ErrorCode.ENGINE_UNKNOWN),
        ({}, ErrorCode.ENGINE_UNKNOWN),
        ({"engine": "LangGraph"}, ErrorCode.ENGINE_UNKNOWN),
        ({"engine": "langgraph", "fallback": "memory"}, ErrorCode.CONFIG_INVALID),
        ({"engine": "langgraph", "store": "mysql://x"}, ErrorCode.STORE_URL_INVALID),
        ({"engine": "langgraph", "store": "sqlite:/x.db"}, ErrorCode.STORE_URL_INVALID),
        ({"engine": "langgraph", "store": "state.db"}, ErrorCode.STORE_URL_INVALID),
        ({"engine": "langgraph", "lease_ttl_s": -1}, ErrorCode.CONFIG_INVALID),
    ],
)
def test_selection_refuses_anything_but_the_exact_configuration(
    document: dict[str, Any], code: ErrorCode
) -> None:
    with pytest.raises(ExecsysError) as caught:
        parse_factory_config(document)
    assert caught.value.code is code


def test_the_one_engine_is_selected(tmp_path: Path) -> None:
    config = parse_factory_config({"engine": "langgraph", "store": f"sqlite:///{tmp_path}/s.db"})
    factory = RunnerFactory(config).host_factory()
    assert type(factory).__name__ == "LangGraphHostFactory"


def test_constructing_factories_opens_compiles_and_starts_nothing(tmp_path: Path) -> None:
    config = LangGraphHostConfig(engine="langgraph", store=f"sqlite:///{tmp_path}/s.db")
    RunnerFactory(config).host_factory()
    assert not (tmp_path / "s.db").exists()


def test_creation_creates_storage_but_compiles_nothing(tmp_path: Path) -> None:
    config = LangGraphHostConfig(engine="langgraph", store=f"sqlite:///{tmp_path}/s.db")
    runner = RunnerFactory(config).create(custody=MemoryCustody())
    try:
        assert (tmp_path / "s.db").exists()
        assert runner.host.compiles == 0  # type: ignore[attr-defined]
        assert runner.host.deliveries() == []
    finally:
        runner.close()


def test_a_creation_failure_leaves_no_runner(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    config = LangGraphHostConfig(engine="langgraph", store=f"sqlite:///{blocker}/sub/s.db")
    runner = None
    with pytest.raises(ExecsysError) as caught:
        runner = RunnerFactory(config).create(custody=MemoryCustody())
    assert caught.value.code is ErrorCode.HOST_CREATION_FAILED
    assert runner is None


def test_a_postgres_url_without_a_server_is_one_coded_refusal(tmp_path: Path) -> None:
    store = "postgresql://u:secret@127.0.0.1:1/db"
    config = parse_factory_config({"engine": "langgraph", "store": store})
    with pytest.raises(ExecsysError) as caught:
        RunnerFactory(config).create(custody=MemoryCustody())
    assert caught.value.code is ErrorCode.STORE_UNREACHABLE
    assert "secret" not in caught.value.one_line()


def test_the_url_option_is_the_stores_own_and_libpq_never_sees_it() -> None:
    url = "postgresql://u@h:5432/db?application_name=x&execsys_prepare=off"
    assert prepares(url) is False
    assert prepares("postgresql://u@h:5432/db") is True
    assert prepares("postgresql://u@h:5432/db?execsys_prepare=on") is True
    libpq = conninfo(url)
    assert "execsys_prepare" not in libpq and "application_name=x" in libpq


@pytest.mark.parametrize("value", ["maybe", ""])
def test_a_bad_option_value_is_a_store_url_error(value: str) -> None:
    problem = store_url_problem(f"postgresql://u@h/db?execsys_prepare={value}")
    assert problem is not None and "use on or off" in problem
