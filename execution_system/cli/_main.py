"""Argument parsing and the error boundary of ``execsys``.

Commands import what they need lazily: commands that execute no graph must not
pay for importing LangGraph (see docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from contracts import ErrorCode, ExecsysError, error
from execution_system.cli._collector import tune_collector
from execution_system.cli._output import report_error

Handler = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one catalogued line."""

    def error(self, message: str) -> NoReturn:
        raise error(
            ErrorCode.USAGE,
            message,
            path=self.prog,
            expected=f"see '{self.prog} --help'",
        )


def build_parser() -> argparse.ArgumentParser:
    """Build the full ``execsys`` parser."""
    from execution_system.cli import (
        _audit,
        _delivery,
        _demo,
        _fleet,
        _goal,
        _graph,
        _journal,
        _operator,
        _store,
        _web,
    )

    parser = _Parser(
        prog="execsys",
        description="Durable workflow host for governed agent work.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    _graph.register(commands)
    _delivery.register(commands)
    _fleet.register(commands)
    _journal.register(commands)
    _audit.register_keys(commands)
    _operator.register(commands)
    _goal.register(commands)
    _demo.register(commands)
    _web.register(commands)
    _store.register(commands)
    return parser


def _driver_failure(exc: Exception, args: argparse.Namespace | None) -> ExecsysError | None:
    """A store driver's exception as one catalogued line; None for anything else.

    The driver is told by its exception's module, so that neither driver is
    imported here for an error that is not its own (nor at all by this layer).
    """
    module = type(exc).__module__
    if module != "sqlite3" and not module.startswith("psycopg"):
        return None
    from contracts import sqlite_path
    from execution_system._compose import store_url
    from host import store_failure

    url = store_url(getattr(args, "store", None))
    raw = sqlite_path(url) if module == "sqlite3" else None
    return store_failure(exc, str(Path(raw).absolute()) if raw else url)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``execsys`` console script; returns the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in arguments
    args: argparse.Namespace | None = None
    try:
        args = build_parser().parse_args(arguments)
        handler: Handler = args.handler
        tune_collector(args)
        status = handler(args)
        from execution_system.cli._signals import describe, exit_status

        interrupted = exit_status()
        if interrupted is not None:
            sys.stderr.write(f"execsys: {describe()}\n")
            return interrupted
        return status
    except ExecsysError as exc:
        return report_error(exc, as_json)
    except BrokenPipeError:
        # The reader went away (e.g. '| head'): not an error of ours.
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("execsys: interrupted\n")
        return 130
    except Exception as exc:  # the boundary: never a traceback on a user's terminal
        mapped = _driver_failure(exc, args)
        if mapped is not None:
            # A store failing after it was opened (damage, a lost server, a lock held).
            return report_error(mapped, as_json)
        if os.environ.get("EXECSYS_DEBUG"):
            raise
        internal = error(
            ErrorCode.INTERNAL,
            f"unexpected {type(exc).__name__}: {exc}".splitlines()[0][:300],
            expected="no internal error; rerun with EXECSYS_DEBUG=1 and report the traceback",
        )
        return report_error(internal, as_json)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
