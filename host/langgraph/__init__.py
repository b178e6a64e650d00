"""The private LangGraph adapter of the Workflow Host (the only place importing langgraph).

Importing this package does not import LangGraph: the factory and the Host
load it on first use, so reading commands start fast.
"""

from host.langgraph._factory import LangGraphHostFactory, store_location

__all__ = ["LangGraphHostFactory", "store_location"]
