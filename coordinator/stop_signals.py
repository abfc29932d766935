"""SIGINT (Ctrl-C) and SIGTERM (`kill`, systemd) as one orderly stop request.

A handler that raises KeyboardInterrupt lands wherever the main thread is, often in the middle
of a py4j call; PySpark's own SIGINT handler also cancels every running Spark job, failing the
micro-batches in flight. Both make an ordinary stop log errors. Here a signal only *asks*:
the entry point (`txcoord up`, coordinator/app.py) sees `requested`, leaves its loop and runs
its stop once, in order (coordinator/runtime/engine.py lets the batch in flight finish). A second
signal sets `hurry`: stop without waiting for that batch (it is replayed by the next start).

While the entry point is still starting (`interrupting`), the first signal also raises
KeyboardInterrupt, so a start that hangs can be abandoned. SIGKILL is not a stop but a crash,
and recovers as one.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

__all__ = ["StopSignals"]


class StopSignals:
    """The stop request that SIGINT and SIGTERM make; install from the main thread."""

    def __init__(self, interrupting: bool = False) -> None:
        self.requested = threading.Event()
        self.hurry = threading.Event()
        self.interrupting = interrupting

    def install(self) -> StopSignals:
        """Handle SIGINT and SIGTERM from now on."""
        signal.signal(signal.SIGINT, self.on_signal)
        signal.signal(signal.SIGTERM, self.on_signal)
        return self

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """Ask for a stop; a second signal asks to hurry."""
        if self.requested.is_set():
            self.hurry.set()
            return
        self.requested.set()
        if self.interrupting:
            raise KeyboardInterrupt
