"""The ``execsys`` command line."""

from execution_system.cli._main import main

__all__ = ["main"]
