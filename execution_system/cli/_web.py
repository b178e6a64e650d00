"""``execsys web``, ``execsys web token add`` and ``execsys watch``."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import logging
import sys
from pathlib import Path
from typing import Any

from contracts import ErrorCode, error
from execution_system.cli._output import emit, emit_json

DEFAULT_LISTEN = "127.0.0.1:8780"


def register(commands: Any) -> None:
    """Add ``web`` (with ``web token add``) and ``watch``."""
    web = commands.add_parser("web", help="serve the HTTP API and the operator console")
    web.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT", help="address")
    web.add_argument("--tokens", metavar="FILE", help="tokens file (required beyond loopback)")
    web.add_argument("--store", metavar="URL", help="store URL")
    web.add_argument(
        "--config",
        metavar="FILE",
        help="runner config for admitted deliveries (default: ./execsys.yaml if present)",
    )
    web.set_defaults(handler=_serve)
    sub = web.add_subparsers(dest="web_command", metavar="SUBCOMMAND")
    token = sub.add_parser("token", help="manage bearer tokens")
    token_sub = token.add_subparsers(dest="token_command", metavar="SUBCOMMAND")
    token_sub.required = True
    add = token_sub.add_parser("add", help="create a token; print it once, keep only its hash")
    add.add_argument(
        "--role", required=True, choices=["viewer", "operator", "approver", "agent"], help="role"
    )
    add.add_argument("--actor", required=True, metavar="NAME", help="who acts with the token")
    add.add_argument(
        "--delivery",
        action="append",
        default=[],
        metavar="DELIVERY",
        help="agent: a delivery it may answer (repeat)",
    )
    add.add_argument("--tokens", default=".execsys/tokens.yaml", metavar="FILE", help="tokens file")
    add.add_argument("--json", action="store_true", help="print a JSON document")
    add.set_defaults(handler=_token_add)

    watch = commands.add_parser("watch", help="follow a delivery driven by another process")
    watch.add_argument("delivery", metavar="DELIVERY", help="delivery id")
    watch.add_argument("--store", metavar="URL", help="store URL")
    watch.add_argument("--config", metavar="FILE", help="runner config (unused here)")
    watch.add_argument("--json", action="store_true", help="print one JSON object per change")
    watch.add_argument(
        "--interval", type=float, default=0.25, metavar="SECONDS", help="poll interval"
    )
    watch.set_defaults(handler=_watch)


def parse_listen(text: str) -> tuple[str, int, bool]:
    """``HOST:PORT`` (``[v6]:PORT``) -> host, port, whether the host is loopback."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise error(
            ErrorCode.WEB_LISTEN_REFUSED,
            f"{text!r} is not HOST:PORT",
            path="--listen",
            expected="HOST:PORT, e.g. 127.0.0.1:8780",
        )
    if host == "localhost":
        return host, int(port), True
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False  # a name might resolve to anything: treat it as exposed
    return host, int(port), loopback


def _serve(args: argparse.Namespace) -> int:
    if args.web_command is not None:  # 'web token' without a subcommand is caught by argparse
        return 2
    host_name, port, loopback = parse_listen(args.listen)
    from execution_system.web import load_tokens

    tokens = load_tokens(Path(args.tokens)) if args.tokens else None
    if tokens is None and not loopback:
        raise error(
            ErrorCode.WEB_LISTEN_REFUSED,
            f"{host_name} is not a loopback address and no tokens file is given",
            path="--listen",
            expected="--tokens FILE (see 'execsys web token add'), or --listen 127.0.0.1:PORT",
        )
    import uvicorn

    from execution_system._compose import config_path, load_runner_config, store_url
    from execution_system.codeclosure import GoalRuntime
    from execution_system.web import create_app, fleet_source
    from execution_system.web._server import StoppingServer

    # --config, else an execsys.yaml in the working directory (as beside a spec for 'run')
    config = load_runner_config(config_path(args.config, Path.cwd() / "spec"))
    # Goals live in the Host's store on every backend: the console always shows them.
    goals = GoalRuntime(args.store)
    runner = goals.runner
    app = create_app(
        runner.host,
        tokens=tokens,
        goals=goals,
        executors=config.executors,
        loopback=loopback,
        runners=fleet_source(runner.host),
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    sys.stderr.write(
        f"execsys web: serving {store_url(args.store)} on http://{args.listen}/ "
        f"({'tokens from ' + args.tokens if tokens else 'no tokens: loopback only'})\n"
    )
    try:
        served = uvicorn.Config(
            app, host=host_name, port=port, log_level="warning", access_log=False
        )
        StoppingServer(served, runner.host).run()
    finally:
        goals.close()
    return 0


def _token_add(args: argparse.Namespace) -> int:
    from execution_system.web import add_token

    path = Path(args.tokens)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    token = add_token(path, args.role, args.actor, tuple(args.delivery))
    if args.json:
        emit_json(
            {
                "token": token,
                "role": args.role,
                "actor": args.actor,
                "delivery": args.delivery[0] if len(args.delivery) == 1 else args.delivery or None,
            }
        )
        return 0
    emit(f"added a {args.role} token for {args.actor} to {path} (only its hash is kept);")
    emit("it is shown once, here:")
    emit(token)
    return 0


_FINAL = {"completed", "failed", "cancelled", "retired", "stopped"}


def _watch(args: argparse.Namespace) -> int:
    from execution_system._compose import open_runner
    from execution_system.web import ChangeFeed

    runner = open_runner(args.store, read_only=True)
    try:
        return asyncio.run(_follow(runner.host, args, ChangeFeed))
    finally:
        runner.close()


async def _follow(host: Any, args: argparse.Namespace, feed_type: Any) -> int:
    def listing(since: float | None = None) -> list[dict[str, Any]]:
        report = host.status(args.delivery)
        return [
            {
                "delivery": report.delivery,
                "graph": report.graph,
                "status": report.status.value,
                "outcome": report.outcome,
                "updated": report.updated,
                "message": report.message,
            }
        ]

    first = listing()[0]
    _show(first, args.json)
    if first["status"] in _FINAL:
        return 0
    feed = feed_type(listing, interval_s=max(0.05, args.interval))
    async for change in feed.subscribe():
        change["message"] = host.status(args.delivery).message
        _show(change, args.json)
        if change["status"] in _FINAL:
            break
    await feed.close()
    return 0


def _show(change: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps({k: change.get(k) for k in sorted(change)}) + "\n")
    else:
        outcome = f" ({change['outcome']})" if change.get("outcome") else ""
        message = f"  {change['message']}" if change.get("message") else ""
        emit(f"{change['delivery']}: {change['status']}{outcome}{message}")
    sys.stdout.flush()
