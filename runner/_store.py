"""Store administration: bring a store's schema to this release's (``execsys store migrate``)."""

from __future__ import annotations


def migrate_postgres(url: str) -> tuple[int, int]:
    """Apply the Host's migrations, then the checkpoint library's; return (before, after).

    The runner composes the two because it is the layer that selects the
    substrate: the store package knows no LangGraph, the adapter no Host tables.
    """
    from host.langgraph._pg_saver import setup_checkpoint_tables
    from host.storage.postgres import migrate

    return migrate(url, setup_checkpoint_tables)
