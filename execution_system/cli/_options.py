"""Options shared by several commands."""

from __future__ import annotations

import argparse


def add_lease_ttl(parser: argparse.ArgumentParser) -> None:
    """``--lease-ttl S``: on every command that drives a delivery."""
    parser.add_argument(
        "--lease-ttl",
        metavar="S",
        help="seconds a lease outlives a runner that stopped renewing it "
        "(default: EXECSYS_LEASE_TTL or 30)",
    )


def add_queue(parser: argparse.ArgumentParser) -> None:
    """``--queue``: record the request and leave driving to a runner (``execsys serve``)."""
    parser.add_argument(
        "--queue",
        action="store_true",
        help="record it and queue the delivery for a runner ('execsys serve') instead of "
        "driving it here",
    )
