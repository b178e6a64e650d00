"""The LangGraph versions this adapter was written and tested against."""

from __future__ import annotations

from importlib.metadata import version

import langgraph

TESTED = {
    "langgraph": "1.2.24",
    "langgraph-checkpoint": "4.3.2",
    "langgraph-checkpoint-sqlite": "3.1.2",
}


def installed() -> dict[str, str]:
    """Installed versions of the LangGraph distributions the adapter uses."""
    assert langgraph is not None
    return {name: version(name) for name in TESTED}
