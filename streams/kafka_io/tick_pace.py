"""How often the ticker must send heartbeats: every tick while a timer may be near, rarely when not.

Heartbeats exist for the stage's timers (streams/kafka_io/ticker.py): a check, discard, expiry or
orphan fires only once the watermark has passed its due store time. Each heartbeat costs a
whole micro-batch (a Kafka read, the stateful stage and its state commit), so a stack that
heartbeats every second keeps the engine busy with nothing to do. So the ticker runs at two
speeds:

- **busy**, every `tick_interval`: from any batch that landed a record or wrote a decision
  until `horizon` + `margin` later (the margin: the skew the watermark trails by, and a tick
  and a batch to carry it past a due time). Every timer the stage sets is due within
  `horizon` of the batch that set it: a half's first check at its store time + max(timeout,
  its immunity), an op's orphan wait, a check's successor (or the discard) one check
  interval after it was sent (tests/reference/lifecycle.py). A batch that sets a timer due later
  than the horizon (a half with a longer `check_immunity_seconds`) extends the busy time to
  cover it. A timer that fires emits a check, a discard or a verdict, so its batch starts
  the next busy stretch: the chain of checks of one transaction keeps the ticker busy until
  it ends.
- **idle**, every `idle_tick_interval`, otherwise. The timers still due then are those set
  longer ago than any horizon: a decided transaction forgotten after `resolved_retention`,
  a half expired after `file_reserved_time`, and, after a restart, a long immunity the
  process had not seen. They fire up to one idle interval later than due; each of them
  decides nothing a producer waits for.

A process starts busy (its state may hold timers due any moment). The pace is told about
activity by the coordinator's writer (streams/query/batch_writer.py) once a batch's rows are
written, and read by the ticker before every tick. No Spark, no Kafka: a clock and a lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta


class TickPace:
    """Whether the ticker is busy (a timer may be near) or may tick at its idle interval."""

    def __init__(
        self,
        horizon: timedelta,
        margin: timedelta,
        idle_interval: timedelta,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.horizon = horizon.total_seconds()
        self.margin = margin.total_seconds()
        self.idle_interval = idle_interval.total_seconds()
        self._clock = clock
        self._lock = threading.Lock()
        self._busy_until = clock() + self.horizon + self.margin

    def busy(self) -> bool:
        """Return True while a timer set by a recent batch may come due."""
        with self._lock:
            return self._clock() < self._busy_until

    def saw_activity(self, due_within: timedelta = timedelta(0)) -> None:
        """Keep busy for the horizon from now (or `due_within`, if longer), plus the margin."""
        until = self._clock() + max(self.horizon, due_within.total_seconds()) + self.margin
        with self._lock:
            self._busy_until = max(self._busy_until, until)
