"""The private LangGraph adapter of the Workflow Host (the only place importing langgraph)."""
