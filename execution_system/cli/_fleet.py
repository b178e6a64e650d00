"""``execsys submit | serve | runners``: deliveries queued for a runner fleet."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from execution_system.cli._delivery import add_admission, admitted_from_args, print_status


def register(commands: Any) -> None:
    """Add the fleet commands."""
    submit = commands.add_parser(
        "submit", help="admit a delivery and queue it for a runner ('execsys serve')"
    )
    add_admission(submit)
    submit.set_defaults(handler=_submit)


def _submit(args: argparse.Namespace) -> int:
    from execution_system._compose import open_runner

    delivery, executors_dir = admitted_from_args(args)
    runner = open_runner(args.store, executors_dir, lease_ttl=args.lease_ttl)
    try:
        report = asyncio.run(runner.host.submit(delivery, seed=args.seed))
    finally:
        runner.close()
    return print_status(report, args.json, drove=False)
