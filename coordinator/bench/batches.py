"""Every micro-batch of the engine's queries, with the wall time it ended; where time went.

The engine's own ProgressLog keeps the last 1,000 summaries without a time; the bench adds
a listener of its own that keeps every summary (streams/progress/batch_log.py `summary`: rows,
duration, its phases, state rows, lag) with the wall clock at which Spark reported it, so
each phase of the run can take exactly its batches.

Spark's duration phases (`durationMs`): `addBatch` is the query's own work (for the
coordinator: the foreachBatch writer, which includes reading Kafka, the state stage, landing
and every Delta commit); `latestOffset` / `getBatch` / `queryPlanning` are planning
the batch; `walCommit` / `commitOffsets` write the checkpoint.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from coordinator.bench.stats import median, summarize
from streams.progress.batch_log import summary
from streams.progress.listener import ProgressListener


class BatchRecorder(ProgressListener):
    """Keeps every batch summary, with `at` = the wall time (epoch s) it was reported."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.batches: list[dict[str, Any]] = []

    def on_progress(self, progress: dict[str, Any]) -> None:
        """Keep the batch's summary."""
        line = summary(progress)
        line["at"] = time.time()
        with self._lock:
            self.batches.append(line)

    def between(self, start: float, end: float, query: str | None = None) -> list[dict[str, Any]]:
        """Return the batches reported in [start, end] (epoch s), of `query` if given."""
        with self._lock:
            return [
                b
                for b in self.batches
                if start <= b["at"] <= end and (query is None or b["query"] == query)
            ]


def where_time_went(batches: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Return, per query: batches, rows, batch durations and the share of each phase."""
    result: dict[str, Any] = {}
    for query in sorted({str(b["query"]) for b in batches}):
        mine = [b for b in batches if b["query"] == query and b["duration_ms"] is not None]
        working = [b for b in mine if b["rows"]]
        total = sum(b["duration_ms"] for b in mine)
        phases: dict[str, int] = {}
        for b in mine:
            for phase, ms in (b["phases_ms"] or {}).items():
                phases[phase] = phases.get(phase, 0) + int(ms)
        result[query] = {
            "batches": len(mine),
            "batches_with_rows": len(working),
            "rows": sum(int(b["rows"] or 0) for b in mine),
            "duration_ms": summarize([b["duration_ms"] for b in mine], 0),
            "duration_ms_with_rows": summarize([b["duration_ms"] for b in working], 0),
            "busy_ms": total,
            "phase_share": {k: round(v / total, 3) for k, v in sorted(phases.items())}
            if total
            else {},
            "state_rows_median": median([b["state_rows"] for b in mine]),
            "state_rows_max": max((b["state_rows"] for b in mine), default=None),
            "dropped_late": sum(int(b["dropped_late"] or 0) for b in mine),
        }
    return result
