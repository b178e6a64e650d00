"""Runner: selects the configured Host factory and drives deliveries through it."""

from runner._executors import Executors, parse_result, run_command
from runner._factory import Runner, RunnerFactory, parse_factory_config

__all__ = [
    "Executors",
    "Runner",
    "RunnerFactory",
    "parse_factory_config",
    "parse_result",
    "run_command",
]
