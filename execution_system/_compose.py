"""Composing a Runner for the CLI: store URL, real custody, executor bindings."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from contracts import (
    DEFAULT_STORE,
    CommandBinding,
    ErrorCode,
    ExecutorBinding,
    PythonBinding,
    RunnerConfig,
    RunnerFactoryConfig,
    error,
    sqlite_path,
    validation_message,
)
from execution_system._loading import load_document
from execution_system.custody import FileCustody
from host import Operation
from runner import Runner, RunnerFactory, parse_factory_config

_BINDING_KINDS = frozenset({"command", "python", "scripted"})


def store_url(flag: str | None) -> str:
    """``--store``, else ``EXECSYS_STORE``, else the embedded default.

    A ``--store`` given empty is refused later as a bad URL, never replaced by
    the default; an empty ``EXECSYS_STORE`` counts as unset (shell habit).
    """
    if flag is not None:
        return flag
    return os.environ.get("EXECSYS_STORE") or DEFAULT_STORE


def factory_config(
    flag: str | None, *, read_only: bool = False, existing: bool = False
) -> RunnerFactoryConfig:
    """The closed Host selection for a store URL.

    ``read_only``: never create or write it; ``existing``: write it, but never create it.
    """
    document: dict[str, Any] = {"engine": "langgraph", "store": store_url(flag)}
    if read_only:
        document["read_only"] = True
    if existing:
        document["create"] = False
    return parse_factory_config(document)


def data_dir(config: RunnerFactoryConfig) -> Path:
    """Where workspaces, blobs, keys and locks live: beside the store file by default."""
    if config.data_dir:
        return Path(config.data_dir).absolute()
    raw = sqlite_path(config.store)
    base = Path(raw).parent if raw else Path(".execsys")
    return base.absolute()


def load_runner_config(path: Path | None) -> RunnerConfig:
    """Read the runner config (executor bindings); an absent default file means none."""
    if path is None:
        return RunnerConfig()
    document: Any = load_document(path)
    if not isinstance(document, dict):
        raise error(ErrorCode.CONFIG_INVALID, "config is not a mapping", path=str(path))
    try:
        config = RunnerConfig.model_validate_json(json.dumps(document))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = list(first["loc"])
        if len(loc) > 3 and loc[0] == "executors" and loc[2] in _BINDING_KINDS:
            del loc[2]  # the union's tag: the key that names the binding's kind
        where = ".".join(str(p) for p in loc)
        raise error(
            ErrorCode.CONFIG_INVALID,
            validation_message(first["msg"]),
            path=f"{path}:{where}",
            expected="executors: {NAME: {command: [...]} | {python: mod:func} | {scripted: [...]}}",
        ) from None
    return RunnerConfig(
        executors={
            name: _anchored(binding, path.parent.absolute())
            for name, binding in config.executors.items()
        }
    )


def _names_local_file(arg: str, folder: Path, *, first: bool) -> bool:
    """Whether ``arg`` is a relative path to a file beside the config (``agents/x.py``).

    The program itself may be a bare name; other arguments must look like paths
    (a '/' or a '.') so that words such as ``lint`` are never rewritten.
    """
    if os.path.isabs(arg) or not (folder / arg).is_file():
        return False
    return first or "/" in arg or "." in arg


def _anchored(binding: ExecutorBinding, folder: Path) -> ExecutorBinding:
    """Make a binding independent of the current directory (the delivery records it)."""
    if isinstance(binding, CommandBinding):
        argv = [
            str(folder / arg) if _names_local_file(arg, folder, first=i == 0) else arg
            for i, arg in enumerate(binding.command)
        ]
        return binding.model_copy(update={"command": tuple(argv)})
    if isinstance(binding, PythonBinding) and binding.path is None:
        return binding.model_copy(update={"path": str(folder)})
    return binding


def config_path(flag: str | None, spec: Path | None) -> Path | None:
    """``--config``, else ``execsys.yaml`` beside the spec if it exists."""
    if flag:
        return Path(flag)
    if spec is not None:
        candidate = spec.parent / "execsys.yaml"
        if candidate.exists():
            return candidate
    return None


def lease_ttl_s(flag: str | None) -> float | None:
    """``--lease-ttl``, else ``EXECSYS_LEASE_TTL``, else None (the configured default)."""
    if flag is not None:
        where, raw = "--lease-ttl", flag
    else:
        where, raw = "EXECSYS_LEASE_TTL", os.environ.get("EXECSYS_LEASE_TTL", "")
        if raw == "":
            return None
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 3600:  # also refuses nan and inf
        raise error(
            ErrorCode.CONFIG_INVALID,
            f"lease TTL {raw!r} is not a number of seconds in range",
            path=where,
            expected="seconds, more than 0 and at most 3600",
        )
    return value


def open_runner(
    store: str | None,
    executors_dir: Path | None = None,
    operations: Mapping[str, Operation] | None = None,
    *,
    read_only: bool = False,
    existing: bool = False,
    lease_ttl: str | None = None,
) -> Runner:
    """Create the Runner on the configured store, with file custody beside it.

    ``read_only`` is for the reading commands: the store must already exist,
    and neither it nor the folders beside it are created or written.
    ``existing`` is for the commands that act on a stored delivery: the store
    must already exist, and may be written.
    """
    config = factory_config(store, read_only=read_only, existing=existing)
    ttl = lease_ttl_s(lease_ttl)
    if ttl is not None:
        config = config.model_copy(update={"lease_ttl_s": ttl})
    custody = FileCustody(data_dir(config) / "custody")
    if operations is None:
        # Every store may hold CodeClosure deliveries; their operations are always known.
        from execution_system.codeclosure._operations import OPERATIONS as CLOSURE

        operations = CLOSURE
    return RunnerFactory(config).create(
        custody=custody, executors_dir=executors_dir, operations=operations
    )
