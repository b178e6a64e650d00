"""The Workflow Host: executes admitted control graphs on private durable threads."""

from host._operations import OPERATIONS, Operation

__all__ = ["OPERATIONS", "Operation"]
