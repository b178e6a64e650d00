"""``execsys submit | serve | runners``: deliveries queued for a runner fleet."""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
from pathlib import Path
from typing import Any

from contracts import ErrorCode, error
from execution_system.cli._delivery import (
    add_admission,
    add_store,
    admitted_from_args,
    print_status,
)
from execution_system.cli._options import add_lease_ttl
from execution_system.cli._output import emit, emit_json


def register(commands: Any) -> None:
    """Add the fleet commands."""
    submit = commands.add_parser(
        "submit", help="admit a delivery and queue it for a runner ('execsys serve')"
    )
    add_admission(submit)
    submit.set_defaults(handler=_submit)

    serve = commands.add_parser(
        "serve", help="a long-running runner: claim queued deliveries and drive them"
    )
    add_store(serve)
    serve.add_argument(
        "--concurrency", default="1", metavar="N", help="deliveries driven at once (default 1)"
    )
    serve.add_argument("--name", metavar="NAME", help="this runner's name (default HOST-PID)")
    serve.add_argument(
        "--poll-interval",
        default="0.25",
        metavar="S",
        help="seconds between looks for queued work when nothing wakes the runner "
        "(default 0.25; on PostgreSQL a queued delivery wakes it at once)",
    )
    serve.add_argument(
        "--drain-grace",
        default="20",
        metavar="S",
        help="after SIGTERM or SIGINT, seconds turns in flight may run on before they are "
        "ended and handed back to the queue (default 20; 0: at once; a second signal: at once)",
    )
    add_lease_ttl(serve)
    serve.set_defaults(handler=_serve)

    runners = commands.add_parser(
        "runners", help="the live runners: name, host, pid, heartbeat, deliveries held"
    )
    runners.add_argument(
        "--store",
        metavar="URL",
        help="store URL (default: EXECSYS_STORE or sqlite:///.execsys/state.db)",
    )
    runners.add_argument("--json", action="store_true", help="print a JSON document")
    runners.set_defaults(handler=_runners)


def _submit(args: argparse.Namespace) -> int:
    from execution_system._compose import open_runner

    delivery, executors_dir = admitted_from_args(args)
    runner = open_runner(args.store, executors_dir, lease_ttl=args.lease_ttl)
    try:
        report = asyncio.run(runner.host.submit(delivery, seed=args.seed))
    finally:
        runner.close()
    return print_status(report, args.json, drove=False)


def _serve(args: argparse.Namespace) -> int:
    from execution_system._compose import factory_config, lease_ttl_s, open_runner
    from execution_system.cli._serve import Server

    factory_config(args.store)
    lease_ttl_s(args.lease_ttl)
    concurrency = _count(args.concurrency, "--concurrency")
    poll_s = _seconds(args.poll_interval, "--poll-interval")
    grace_s = _seconds(args.drain_grace, "--drain-grace", least=0.0)
    executors_dir = Path(args.config).parent.absolute() if args.config else Path.cwd()
    name = args.name or f"{socket.gethostname()}-{os.getpid()}"
    runner = open_runner(args.store, executors_dir, lease_ttl=args.lease_ttl)
    try:
        server = Server(
            runner.host,
            concurrency=concurrency,
            name=name,
            as_json=args.json,
            poll_s=poll_s,
            grace_s=grace_s,
        )
        return asyncio.run(server.main())
    finally:
        runner.close()


def _count(text: str, flag: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 1024:
        raise error(ErrorCode.USAGE, f"{flag} {text!r}", path=flag, expected="an integer 1..1024")
    return value


def _seconds(text: str, flag: str, *, least: float = 0.01) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not least <= value <= 86400:  # also refuses nan
        raise error(
            ErrorCode.USAGE, f"{flag} {text!r}", path=flag, expected=f"seconds {least:g}..86400"
        )
    return value


def _runners(args: argparse.Namespace) -> int:
    from execution_system._compose import open_runner

    runner = open_runner(args.store, read_only=True)
    try:
        rows = runner.host.runners()
    finally:
        runner.close()
    if args.json:
        emit_json({"runners": [row.to_json() for row in rows]})
        return 0
    if not rows:
        emit("no live runners")
    for row in rows:
        held = ", ".join(row.deliveries) or "-"
        emit(
            f"{row.name}  {row.host}  pid {row.pid}  "
            f"heartbeat {row.heartbeat} ({row.age_s:.1f}s ago)  holds {held}"
        )
    return 0
