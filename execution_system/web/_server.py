"""``execsys web``'s HTTP server: uvicorn's, and a shutdown that does not wait on long turns.

Without runners (``execsys serve``), a request that answers, resolves, recovers
or admits a delivery drives it in this process until its next stop. uvicorn's
graceful shutdown waits for every request in flight, so a turn that runs for
minutes kept a SIGTERM waiting as long, and a second signal then cut the
delivery off mid-step, as a crash would. Here the first shutdown signal also
asks the Host to stop what it drives, as an operator's stop would
(:meth:`host.HostCore.stop_all`, decision 0136): turns end, workspaces are
restored, the requests answer with the ``stopped`` status, and the shutdown
goes on as uvicorn's always does.
"""

from __future__ import annotations

import asyncio
import signal
from types import FrameType
from typing import Any

import uvicorn


class StoppingServer(uvicorn.Server):
    """uvicorn's server whose first shutdown signal stops what this process drives."""

    def __init__(self, config: uvicorn.Config, host: Any) -> None:
        super().__init__(config)
        self.host = host
        self.loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: Any = None) -> None:
        """Serve, remembering the loop the signal handler hands the stop to."""
        self.loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """A shutdown signal: stop the deliveries driven here, then uvicorn's own handling."""
        if not self.should_exit and self.loop is not None:
            # This runs as a signal handler: wake the loop, which stops them itself.
            reason = f"the web process received {signal.Signals(sig).name}"
            self.loop.call_soon_threadsafe(self.host.stop_all, reason)
        super().handle_exit(sig, frame)
