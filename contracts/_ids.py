"""Identity and digest types shared by every layer."""

from __future__ import annotations

from typing import NewType

DeliveryId = NewType("DeliveryId", str)
"""Identity of one admitted delivery (``d-`` followed by the first 24 hex of its digest)."""

NodeId = NewType("NodeId", str)
"""Identity of a node inside one control graph."""

Digest = NewType("Digest", str)
"""A content digest, always written ``sha256:<64 lowercase hex>``."""

InvocationId = NewType("InvocationId", str)
"""Identity of one executor invocation (stable across the turns of one episode)."""

CorrelationId = NewType("CorrelationId", str)
"""Identity of one pending action-input question."""

SavepointId = NewType("SavepointId", str)
"""Identity of one custody savepoint (the digest of its manifest)."""
