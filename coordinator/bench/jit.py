"""The Spark JVM's JIT compilers, as the bench sees them: a fresh JVM compiles for minutes.

HotSpot compiles hot methods twice (C1 soon, C2 once they stay hot), and Spark's planner,
its generated code and the stage's processor are many large methods: under load, the Spark
JVM of a fresh engine spent about one of the two cores compiling for its first 80 s, and
about a tenth of a core from 100 s on (JFR `jdk.Compilation` events, 2026-11-26). A
phase measured in that first minute charges a start-up cost to the steady state, so the
warm-up drives load until compiling has settled (`Settling`), and every phase reports the
seconds the compilers spent during it (`compile_seconds`, the JVM's own
`CompilationMXBean` total: the summed duration of every compilation).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any


def compile_seconds(spark: Any) -> float | None:
    """Return the seconds the JVM behind `spark` has spent compiling so far (None: unknown)."""
    bean = spark._jvm.java.lang.management.ManagementFactory.getCompilationMXBean()
    if bean is None or not bean.isCompilationTimeMonitoringSupported():
        return None
    return float(bean.getTotalCompilationTime()) / 1000


def spent(before: float | None, after: float | None) -> float | None:
    """Return the compile seconds between two `compile_seconds` readings (None: unknown)."""
    return None if before is None or after is None else round(after - before, 2)


@dataclass
class Settling:
    """Tells when compiling has settled: under `share` of the last `window` seconds.

    `observe` takes (wall seconds, compile seconds) samples, in order. The defaults follow a
    measured JVM under the bench's load (per 10 s: 9-12 s of compiling for the first 60 s,
    then falling to 1-2 s from 100 s on, a long tail of small compilations): a 15 s window
    passed in a lull at 44 s, and the JVM then compiled for 0.68 cores through the next
    phase, so the window is 30 s.
    """

    window: float = 30.0
    share: float = 0.15
    _samples: deque[tuple[float, float]] = field(default_factory=deque)

    def observe(self, at: float, compiled: float) -> None:
        """Record that the compilers' total was `compiled` seconds at wall time `at`."""
        self._samples.append((at, compiled))
        while len(self._samples) > 2 and at - self._samples[1][0] >= self.window:
            self._samples.popleft()

    def recent_share(self) -> float | None:
        """Return the share of the last `window` seconds spent compiling (None: too soon)."""
        if len(self._samples) < 2:
            return None
        (first_at, first), (last_at, last) = self._samples[0], self._samples[-1]
        span = last_at - first_at
        if span < self.window:
            return None
        return (last - first) / span

    def settled(self) -> bool:
        """Return True once a whole window has been seen and compiling took under `share`."""
        share = self.recent_share()
        return share is not None and share < self.share
