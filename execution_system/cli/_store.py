"""``execsys store migrate``: create or upgrade a store's schema."""

from __future__ import annotations

import argparse
from typing import Any

from execution_system.cli._output import emit, emit_json


def register(commands: Any) -> None:
    """Add the ``store`` command group."""
    store = commands.add_parser("store", help="administer a store")
    sub = store.add_subparsers(dest="store_command", metavar="SUBCOMMAND")
    sub.required = True
    migrate = sub.add_parser(
        "migrate", help="create the store's schema, or upgrade it to this release's"
    )
    migrate.add_argument("--store", metavar="URL", help="store URL")
    migrate.add_argument("--json", action="store_true", help="print a JSON document")
    migrate.set_defaults(handler=_migrate)


def _migrate(args: argparse.Namespace) -> int:
    from execution_system._compose import factory_config, open_runner

    config = factory_config(args.store)
    url = config.store
    if url.startswith(("postgresql://", "postgres://")):
        from host import shown_store as shown
        from runner import migrate_postgres

        before, after = migrate_postgres(url)
        document = {"store": shown(url), "backend": "postgresql", "from": before, "to": after}
        text = (
            f"store {shown(url)}: schema {after}, already current"
            if before == after
            else f"store {shown(url)}: schema {before} -> {after}"
        )
    else:
        # The embedded store creates and upgrades its tables whenever it is opened.
        open_runner(args.store).close()
        document = {"store": url, "backend": "sqlite", "from": None, "to": None}
        text = f"store {url}: ready"
    if args.json:
        emit_json(document)
    else:
        emit(text)
    return 0
