"""RunnerFactory: the one configured Host factory, and the Runner it assembles.

Selection is closed: the configuration names exactly one engine and the
factory maps it to exactly one Host factory. There is no registry, no
discovery, no preference order and no fallback; a creation failure leaves no
Runner behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, assert_never

from pydantic import ValidationError

from contracts import Custody, ErrorCode, error, validation_message
from contracts._config import LangGraphHostConfig, RunnerFactoryConfig
from contracts._invocation import Invoker
from host import OPERATIONS, CoordinatorHost, HostFactory, Operation
from runner._executors import Executors


def parse_factory_config(document: Mapping[str, Any]) -> RunnerFactoryConfig:
    """Validate a Host selection document; every problem is one catalogued error."""
    engine = document.get("engine")
    if engine != "langgraph":
        raise error(
            ErrorCode.ENGINE_UNKNOWN,
            f"unknown engine {engine!r}",
            path="engine",
            expected="langgraph",
        )
    try:
        return LangGraphHostConfig.model_validate(dict(document))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        if first["type"] == "extra_forbidden":
            raise error(
                ErrorCode.CONFIG_INVALID,
                f"unknown key '{where}'",
                path=where,
                expected="engine, store, data_dir, lease_ttl_s, read_only, create",
            ) from None
        code = ErrorCode.STORE_URL_INVALID if where == "store" else ErrorCode.CONFIG_INVALID
        raise error(code, validation_message(first["msg"]), path=where) from None


class Runner:
    """A Host plus the executors it invokes; what a runner process drives."""

    def __init__(self, host: CoordinatorHost) -> None:
        self.host = host

    def close(self) -> None:
        """Release the Host."""
        self.host.close()


class RunnerFactory:
    """Selects the configured Host factory and assembles a Runner."""

    def __init__(self, config: RunnerFactoryConfig, *, base: Path | None = None) -> None:
        # Remembering the configuration is all construction does.
        self.config = config
        self.base = base

    def host_factory(self) -> HostFactory:
        """The one Host factory the configuration selects."""
        engine = self.config.engine
        if engine == "langgraph":
            from host.langgraph import LangGraphHostFactory

            return LangGraphHostFactory(self.config, self.base)
        assert_never(engine)

    def create(
        self,
        *,
        custody: Custody,
        invoker: Invoker | None = None,
        executors_dir: Path | None = None,
        operations: Mapping[str, Operation] | None = None,
    ) -> Runner:
        """Create the Host (storage included) and the Runner around it."""
        host = self.host_factory().create(
            custody=custody,
            invoker=invoker or Executors(executors_dir),
            operations={**OPERATIONS, **(operations or {})},
        )
        return Runner(host)
