"""The Workflow Host: executes admitted control graphs on private durable threads.

Owns every rule of the Host design, substrate-free: the step and commit
protocol, materialization, selection and barriers, suspensions and waits,
failure routing, directives and restart, stop/cancel/retire, the journal book,
status and inspect views (the module owning each rule is listed in
``docs/architecture.md``). It talks to two ports it defines: the substrate
(``host._substrate``) and the storage (``host.storage``).

May not import LangGraph or any database driver outside ``host.langgraph`` and
the storage backends (import-linter), nor ``runner`` or ``execution_system``;
no import cycles among its modules.
"""

from host._goals import GoalTable
from host._operations import OPERATIONS, Operation, OperationContext
from host._protocol import CoordinatorHost, HostFactory
from host._reports import (
    ActiveAttempt,
    CustodyHeads,
    DeliveryPage,
    DeliverySummary,
    InspectReport,
    JournalHead,
    LeaseView,
    NeededDirective,
    NodeView,
    PendingWait,
    RetirementFact,
    RunnerView,
    SavepointView,
)
from host._selection import check_selection
from host._store_failures import shown_store, store_failure

__all__ = [
    "OPERATIONS",
    "ActiveAttempt",
    "CoordinatorHost",
    "CustodyHeads",
    "DeliveryPage",
    "DeliverySummary",
    "GoalTable",
    "HostFactory",
    "InspectReport",
    "JournalHead",
    "LeaseView",
    "NeededDirective",
    "NodeView",
    "Operation",
    "OperationContext",
    "PendingWait",
    "RetirementFact",
    "RunnerView",
    "SavepointView",
    "check_selection",
    "shown_store",
    "store_failure",
]
