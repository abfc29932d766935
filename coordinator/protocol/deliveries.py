"""What consumers read: the topic tables' names, and the engine's delivery notices.

A committed message is appended to `topics/<topic>` at the next dense offset of its queue
(contract 6); `system/queue_offsets` holds every queue's next free offset. A consumer reads
both with delta-rs, without Spark (coordinator/sdk/consumer/).

So that a consumer learns of new rows within a batch of their commit instead of polling
the tables, the coordinator publishes, after each batch that delivered, one **delivery
notice** on the deliveries topic (`[kafka] deliveries_topic`, one partition): the batch id
and, for every queue the batch moved, its new next offset. A notice is a hint: it is sent
once the rows are in their table, may be repeated by a replayed batch, and may be lost
(the engine does not fail a batch for it), so a consumer also looks at
`system/queue_offsets` now and then. It never names a row that is not yet readable.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "NOTICE_VERSION",
    "QUEUE_OFFSETS_TABLE",
    "Notice",
    "QueueEnd",
    "decode_notice",
    "delta_rs_location",
    "encode_notices",
    "table_location",
    "topic_table",
    "whole",
]

#: The warehouse table holding every queue's next free offset (delta_tables/queue_offsets.py).
QUEUE_OFFSETS_TABLE = "system/queue_offsets"
#: The notice format this code writes and reads; a consumer skips other versions.
NOTICE_VERSION = 1
#: Queues per notice record: a batch that moved more is announced in several records, each
#: far below Kafka's default 1 MiB record limit (a topic name is at most 127 characters).
QUEUES_PER_NOTICE = 1000


def topic_table(topic: str) -> str:
    """Return the warehouse table name of real topic `topic` (delta_tables/topics.py)."""
    return f"topics/{topic}"


def table_location(warehouse: str, name: str) -> str:
    """Return the location of table `name` ("system/queue_offsets") under `warehouse`."""
    return f"{warehouse.rstrip('/')}/{name}"


def delta_rs_location(location: str) -> str:
    """Return a Spark (Hadoop) table location as deltalake names it: an absolute local path,
    or a URI whose scheme it knows (`s3a://` is Hadoop's name for `s3://`)."""
    if location.startswith("s3a://"):
        return "s3://" + location[len("s3a://") :]
    if "://" not in location:
        return str(Path(location).resolve())
    return location


@dataclass(frozen=True)
class QueueEnd:
    """A queue and its next free offset: every offset below it is in the topic table."""

    topic: str
    queue_id: int
    next_offset: int


@dataclass(frozen=True)
class Notice:
    """One delivery notice: batch `batch_id` moved these queues' ends, at `at_ms`."""

    batch_id: int
    at_ms: int
    queues: tuple[QueueEnd, ...]


def encode_notices(batch_id: int, at_ms: int, queues: Sequence[QueueEnd]) -> Iterator[bytes]:
    """Yield the notice records of one batch (several if it moved many queues)."""
    ordered = sorted(queues, key=lambda q: (q.topic, q.queue_id))
    for start in range(0, len(ordered), QUEUES_PER_NOTICE):
        part = ordered[start : start + QUEUES_PER_NOTICE]
        yield json.dumps(
            {
                "v": NOTICE_VERSION,
                "batch": batch_id,
                "at": at_ms,
                "queues": [[q.topic, q.queue_id, q.next_offset] for q in part],
            },
            separators=(",", ":"),
        ).encode()


#: The largest offset or id a record may carry: a Delta long (and a Kafka offset).
MAX_WHOLE = 2**63 - 1


def whole(value: object) -> int:
    """Return `value` if it is a JSON integer 0..MAX_WHOLE; ValueError otherwise.

    `int()` of what `json.loads` gives is no check: it takes 1.5 and true, and raised
    OverflowError (not ValueError) on Infinity, which a reader that skips bad records did not
    catch: one hostile record on the consumer offsets topic turned every receive of its
    partition into a 500.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_WHOLE:
        raise ValueError(f"not a whole number 0..2^63-1: {value!r}")
    return value


def decode_notice(value: bytes | None) -> Notice | None:
    """Return the notice in `value`, or None if it is not one this code reads.

    A consumer skips what it cannot read rather than stopping: a notice is only a hint.
    """
    try:
        doc = json.loads(value or b"")
        if not isinstance(doc, dict) or doc.get("v") != NOTICE_VERSION:
            return None
        queues = tuple(
            QueueEnd(str(topic), whole(queue), whole(offset))
            for topic, queue, offset in doc["queues"]
        )
        return Notice(whole(doc["batch"]), whole(doc["at"]), queues)
    except (ValueError, TypeError, KeyError):
        return None
