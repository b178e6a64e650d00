"""Runner: selects the configured Host factory and drives deliveries through it."""

from runner._executors import Executors, parse_result, run_command
from runner._factory import Runner, RunnerFactory, parse_factory_config
from runner._store import migrate_postgres

__all__ = [
    "Executors",
    "Runner",
    "RunnerFactory",
    "migrate_postgres",
    "parse_factory_config",
    "parse_result",
    "run_command",
]
