"""``execsys stop | recover | retire``: the operator's commands."""

from __future__ import annotations

import argparse
import asyncio
import getpass
from typing import Any

from execution_system.cli._options import add_lease_ttl, add_queue
from execution_system.cli._output import emit, emit_json


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("delivery", metavar="DELIVERY", help="delivery id")
    parser.add_argument("--store", metavar="URL", help="store URL")
    parser.add_argument("--config", metavar="FILE", help="runner config (executor bindings)")
    parser.add_argument("--actor", metavar="NAME", help="who acts (default: the OS user)")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    add_lease_ttl(parser)


def register(commands: Any) -> None:
    """Add the operator commands."""
    stop = commands.add_parser("stop", help="stop a delivery at its next safe boundary")
    _common(stop)
    stop.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for a running delivery to stop (default 30)",
    )
    stop.add_argument("--reason", default="", metavar="TEXT", help="why (journaled)")
    stop.set_defaults(handler=_stop)

    recover = commands.add_parser("recover", help="apply a recovery directive")
    _common(recover)
    recover.add_argument(
        "--directive",
        required=True,
        choices=["continue", "restart-from-savepoint", "intervene"],
        help="what to do",
    )
    recover.add_argument("--savepoint", metavar="ID", help="restart-from-savepoint: which one")
    recover.add_argument("--node", metavar="NODE", help="intervene: the blocked node")
    group = recover.add_mutually_exclusive_group()
    group.add_argument("--result", metavar="FILE", help="intervene: the node's outputs")
    group.add_argument("--fail", action="store_true", help="intervene: mark the node failed")
    recover.add_argument("--reason", required=True, metavar="TEXT", help="why (journaled)")
    add_queue(recover)
    recover.set_defaults(handler=_recover)

    retire = commands.add_parser("retire", help="delete a finished delivery's thread, keep a fact")
    _common(retire)
    retire.add_argument(
        "--authorization",
        required=True,
        metavar="TOKEN",
        help="the operator's authorization id (recorded in the fact)",
    )
    retire.set_defaults(handler=_retire)


def _actor(args: argparse.Namespace) -> str:
    if args.actor:
        return str(args.actor)
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


def _run(args: argparse.Namespace, call: Any, *, progress: bool = False) -> Any:
    from execution_system._compose import open_runner
    from execution_system.cli._progress import follow, wanted

    runner = open_runner(args.store, existing=True, lease_ttl=args.lease_ttl)
    try:
        enabled = progress and wanted(args.json)
        return asyncio.run(follow(runner.host, args.delivery, call(runner.host), enabled=enabled))
    finally:
        runner.close()


def _stop(args: argparse.Namespace) -> int:
    from execution_system.cli._delivery import print_status

    report = _run(
        args,
        lambda host: host.stop(
            args.delivery, actor=_actor(args), wait_s=args.wait, reason=args.reason
        ),
    )
    return print_status(report, args.json)


def _recover(args: argparse.Namespace) -> int:
    from contracts import ErrorCode, error
    from execution_system import load_document
    from execution_system.cli._delivery import print_status

    if args.directive == "restart-from-savepoint" and not args.savepoint:
        raise error(
            ErrorCode.USAGE,
            "restart-from-savepoint needs --savepoint ID",
            path="--savepoint",
            expected="a savepoint listed by 'execsys inspect'",
        )
    if args.directive == "intervene" and (not args.node or not (args.result or args.fail)):
        raise error(
            ErrorCode.USAGE,
            "intervene needs --node and one of --result or --fail",
            path="--node",
            expected="--node NODE (--result FILE | --fail)",
        )
    result = load_document(args.result) if args.result else None
    report = _run(
        args,
        lambda host: host.recover(
            args.delivery,
            args.directive,
            actor=_actor(args),
            reason=args.reason,
            node=args.node,
            result=result,
            fail=args.fail,
            savepoint=args.savepoint,
            queue=args.queue,
        ),
        progress=not args.queue,
    )
    return print_status(report, args.json, drove=not args.queue)


def _retire(args: argparse.Namespace) -> int:
    fact = _run(
        args, lambda host: host.retire(args.delivery, args.authorization, actor=_actor(args))
    )
    if args.json:
        emit_json(fact.to_json())
    else:
        emit(f"delivery {fact.delivery}: retired under authorization {fact.authorization}")
        emit(
            f"  journal head {fact.journal.head} ({fact.journal.events} events) "
            f"kept as the durable fact {fact.fact}"
        )
    return 0
