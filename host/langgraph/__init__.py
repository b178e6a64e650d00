"""The private LangGraph adapter of the Workflow Host (the only place importing langgraph).

Owns only what is LangGraph's: building the StateGraph of a control graph,
turning the core's step result into a ``Command``, the checkpointer subclass
that writes the Host's rows inside the checkpoint's transaction, the substrate
port on top of them, the mapping of LangGraph's exceptions, and the factory.
It holds no rule of the Host: those live in the core (``host``), which this
package may import but which never imports it.

Importing this package does not import LangGraph: the factory and the Host
load it on first use, so reading commands start fast.
"""

from host.langgraph._factory import LangGraphHostFactory, store_location

__all__ = ["LangGraphHostFactory", "store_location"]
