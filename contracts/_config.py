"""Closed configuration of the Runner's Host selection and the runner's executors."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from contracts._delivery import ExecutorBinding

DEFAULT_STORE = "sqlite:///.execsys/state.db"
_SQLITE = re.compile(r"^sqlite:///(?P<path>/?[^\x00]+)$")
_POSTGRES = re.compile(r"^postgres(?:ql)?://[^\s]+$")


def sqlite_path(url: str) -> str | None:
    """The file path of a ``sqlite:///`` URL (relative or, with four slashes, absolute)."""
    match = _SQLITE.match(url)
    return match.group("path") if match else None


class LangGraphHostConfig(BaseModel):
    """The exact configuration of the LangGraph Host factory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: Literal["langgraph"]
    """The one Host selection value."""
    store: str = DEFAULT_STORE
    """Store URL: ``sqlite:///relative.db``, ``sqlite:////absolute.db`` or ``postgresql://...``."""
    data_dir: str | None = None
    """Folder for workspaces, blobs and locks; default: ``<store folder>/``."""
    lease_ttl_s: float = Field(default=30.0, gt=0, le=3600)
    """How long a lease survives a holder that stopped renewing it (cross-machine)."""

    @field_validator("store")
    @classmethod
    def _known_url(cls, value: str) -> str:
        if sqlite_path(value) is None and not _POSTGRES.match(value):
            raise ValueError(
                f"store URL {value!r} is not sqlite:///PATH, sqlite:////ABSPATH or postgresql://..."
            )
        return value


RunnerFactoryConfig = LangGraphHostConfig
"""The closed Host selection: today exactly one engine, ``langgraph``."""


class RunnerConfig(BaseModel):
    """The runner config file (``execsys.yaml``): executor bindings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    executors: dict[str, ExecutorBinding] = Field(default_factory=dict)
    """Executor name -> binding."""
