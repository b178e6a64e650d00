"""The Workflow Host: executes admitted control graphs on private durable threads."""

from host._operations import OPERATIONS, Operation, OperationContext
from host._protocol import CoordinatorHost, HostFactory
from host._selection import check_selection

__all__ = [
    "OPERATIONS",
    "CoordinatorHost",
    "HostFactory",
    "Operation",
    "OperationContext",
    "check_selection",
]
