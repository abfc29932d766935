"""Streaming query progress: one structured JSON log line per micro-batch, and late-row totals.

Spark counts the rows a stateful operator dropped because they were behind the watermark
(`stateOperators[].numRowsDroppedByWatermark`). For this engine that number must stay zero
(contract 7.5): a dropped half would never be checked, a dropped op never applied. The listener
logs every batch as JSON (`txcoord.progress` logger), logs an error naming the query and batch
whenever rows were dropped, and keeps per-query totals that tests and metrics read.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter, deque
from typing import Any

from streams.progress.listener import ProgressListener

log = logging.getLogger("txcoord.progress")


def summary(progress: dict[str, Any]) -> dict[str, Any]:
    """Return the fields of a progress report worth a log line."""
    operators = progress.get("stateOperators") or []
    return {
        "query": progress.get("name"),
        "batch": progress.get("batchId"),
        "rows": progress.get("numInputRows"),
        "rows_per_s": round(progress.get("processedRowsPerSecond") or 0.0, 1),
        "duration_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
        # Where the batch's time went: addBatch is the writer; the rest is Spark's own.
        "phases_ms": {
            k: v
            for k, v in (progress.get("durationMs") or {}).items()
            if k != "triggerExecution" and v
        },
        "state_rows": sum(op.get("numRowsTotal", 0) for op in operators),
        "dropped_late": sum(op.get("numRowsDroppedByWatermark", 0) for op in operators),
        "watermark": (progress.get("eventTime") or {}).get("watermark"),
        # Kafka sources: records behind the end of the topics when the batch was planned.
        "lag": max(
            (
                int((source.get("metrics") or {}).get("maxOffsetsBehindLatest") or 0)
                for source in progress.get("sources") or []
            ),
            default=0,
        ),
    }


class ProgressLog(ProgressListener):
    """Logs each batch's progress as JSON and totals the rows dropped as late, per query."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dropped: Counter[str] = Counter()
        self.batches: Counter[str] = Counter()
        self.recent: deque[dict[str, Any]] = deque(maxlen=1000)  # summaries, oldest first
        self.last: dict[str, dict[str, Any]] = {}  # the latest summary of each query

    def on_progress(self, progress: dict[str, Any]) -> None:
        """Log the batch and count late rows."""
        line = summary(progress)
        name = str(line["query"])
        with self._lock:
            self._dropped[name] += line["dropped_late"]
            self.batches[name] += 1
            self.recent.append(line)
            self.last[name] = line
        log.info("%s", json.dumps(line, separators=(",", ":")))
        if line["dropped_late"]:
            log.error(
                "query %s batch %s dropped %d row(s) as late",
                name,
                line["batch"],
                line["dropped_late"],
            )

    def dropped_late(self, query: str) -> int:
        """Return the rows query `query` dropped as late since this listener was added."""
        with self._lock:
            return self._dropped[query]
