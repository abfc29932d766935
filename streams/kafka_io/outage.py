"""How long the engine was stopped, against how long the ingress topics keep records.

Producers and the REST ingress go on acknowledging records while the engine is down; the
records wait in the ingress topics. A topic deletes records older than its `retention.ms`
whether or not the engine has read them, so an engine stopped longer than that finds
acknowledged records gone (and its query stops with Spark's data-loss error rather than
skip them). At start the engine compares the time since its query last committed a batch
with the shortest retention of the topics it reads, and says so loudly when the outage was
longer: the operator learns why before the query fails, and what may be lost.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession

from streams.writes.delta_writes import checkpoint_path


def last_commit_ms(spark: SparkSession, checkpoint: str) -> int | None:
    """Return when the query of `checkpoint` last committed a batch (epoch ms), or None."""
    path, fs = checkpoint_path(spark, checkpoint, "commits")
    if not fs.exists(path):
        return None
    times = [int(status.getModificationTime()) for status in fs.listStatus(path)]
    return max(times, default=None)


def outage_warning(
    last_ms: int | None, retention_ms: Mapping[str, int], now_ms: int | None = None
) -> str | None:
    """Return what to tell the operator when the engine was stopped longer than a topic of
    `retention_ms` (topic -> retention.ms; -1 keeps records for ever) keeps records."""
    if last_ms is None:
        return None  # a new checkpoint: it reads the topics from their start
    now = int(time.time() * 1000) if now_ms is None else now_ms
    stopped = now - last_ms
    short = {topic: ms for topic, ms in retention_ms.items() if 0 <= ms < stopped}
    if not short:
        return None
    topic, ms = min(short.items(), key=lambda item: item[1])
    return (
        f"the engine last committed a batch {_hours(stopped)} ago, longer than topic {topic} "
        f"keeps records (retention.ms={ms}, {_hours(ms)}): records acknowledged before the "
        f"last {_hours(ms)} may have been deleted unread, and if so the decision query "
        f"stops with Spark's data-loss error naming them (docs/operations.md, how long the "
        f"engine may stay stopped)"
    )


def topic_retention_ms(described: Any, topics: list[str]) -> dict[str, int]:
    """Return retention.ms of each of `topics` from kafka-python's describe_configs answer."""
    found = {}
    for topic in topics:
        entry = described.get("topic", {}).get(topic, {}).get("retention.ms")
        if entry is not None:
            found[topic] = int(entry.get("value"))
    return found


def _hours(ms: int) -> str:
    return f"{ms / 3_600_000:.1f} h"
