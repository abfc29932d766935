"""Where a foreachBatch call spends its time, one log line per micro-batch.

Spark's progress report gives a batch's `addBatch` time as one number; the writers make
several Spark jobs and Delta commits inside it. Each writer times its steps with a
`StepTimer` and logs them together, so a slow batch says which write was slow.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class StepTimer:
    """Collects (step, seconds) pairs of one batch, in order."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, float]] = []
        self._started = time.perf_counter()

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time the enclosed block as step `name`."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.steps.append((name, time.perf_counter() - started))

    def summary(self) -> str:
        """Return e.g. "total 1.52 s: summary 0.40, system/half_messages 0.33"."""
        total = time.perf_counter() - self._started
        parts = ", ".join(f"{name} {seconds:.2f}" for name, seconds in self.steps)
        return f"total {total:.2f} s: {parts}" if parts else f"total {total:.2f} s"
