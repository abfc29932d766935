"""A topic's rows by (queue, offset), and every queue's end, read with delta-rs (no Spark).

The topic tables keep statistics on `queue_id` and `queue_offset` (delta_tables/topics.py),
so a read of a queue's offsets from N on opens only the files whose ranges can hold them:
the new ones, not the table. Each table is opened once and brought up to date
incrementally (only the log's new commits are read).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import pyarrow.dataset as ds
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from coordinator.protocol.deliveries import (
    QUEUE_OFFSETS_TABLE,
    delta_rs_location,
    table_location,
    topic_table,
)

__all__ = ["QueueReader"]

#: The columns a consumer hands out (coordinator/sdk/consumer/message_view.py).
COLUMNS = [
    "topic",
    "queue_id",
    "queue_offset",
    "msg_id",
    "transaction_id",
    "producer_group",
    "body",
    "keys",
    "tags",
    "properties",
    "prepared_at",
    "committed_at",
    "delivered_at",
]


class QueueReader:
    """Read the warehouse at `warehouse` (a path, `s3a://` or `s3://`); thread-safe.

    `storage_options` are delta-rs's (for S3: the standard AWS_* variables serve too).
    """

    def __init__(self, warehouse: str, storage_options: dict[str, str] | None = None) -> None:
        self.warehouse = warehouse
        self.storage_options = storage_options
        self._tables: dict[str, DeltaTable] = {}
        # Per set of topics: the queues' ends read so far, and the data files they came from.
        self._ends: dict[tuple[str, ...], tuple[dict[tuple[str, int], int], frozenset[str]]] = {}
        self._lock = threading.Lock()  # delta-rs tables are read by one thread at a time

    def ends(self, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        """Return the next free offset of every queue of `topics` (none before a delivery).

        The table gets a row per queue a batch moved, for ever: after the first read of a
        set of topics only the data files not read before are read, and merged into what
        was (an end is the largest `next_offset` of its rows, so a file read twice, such as
        one compaction rewrote, changes nothing).
        """
        wanted = tuple(sorted(set(topics)))
        if not wanted:
            return {}
        with self._lock:
            table = self._table(QUEUE_OFFSETS_TABLE)
            if table is None:
                return {}
            known, seen = self._ends.get(wanted, ({}, frozenset()))
            dataset = table.to_pyarrow_dataset()
            fragments = [f for f in dataset.get_fragments() if f.path not in seen]
            rows = ds.FileSystemDataset(
                fragments, dataset.schema, dataset.format, dataset.filesystem
            ).to_table(
                columns=["topic", "queue_id", "next_offset"],
                filter=ds.field("topic").isin(list(wanted)),
            )
            ends = dict(known)
            for row in rows.to_pylist():
                queue = (row["topic"], row["queue_id"])
                ends[queue] = max(ends.get(queue, 0), row["next_offset"])
            self._ends[wanted] = (ends, frozenset(f.path for f in dataset.get_fragments()))
            return dict(ends)

    def read(self, topic: str, queue_id: int, start: int, end: int) -> list[dict[str, Any]]:
        """Return the rows of (`topic`, `queue_id`) at offsets start <= offset < end, in order."""
        if end <= start:
            return []
        with self._lock:
            table = self._table(topic_table(topic))
            if table is None:
                return []
            rows = table.to_pyarrow_dataset().to_table(
                columns=COLUMNS,
                filter=(ds.field("queue_id") == queue_id)
                & (ds.field("queue_offset") >= start)
                & (ds.field("queue_offset") < end),
            )
        return sorted(rows.to_pylist(), key=lambda row: row["queue_offset"])

    def first_at_or_after(self, topic: str, queue_id: int, moment: datetime) -> int | None:
        """Return the first offset of the queue delivered at or after `moment`, or None."""
        with self._lock:
            table = self._table(topic_table(topic))
            if table is None:
                return None
            rows = table.to_pyarrow_dataset().to_table(
                columns=["queue_offset"],
                filter=(ds.field("queue_id") == queue_id) & (ds.field("delivered_at") >= moment),
            )
        offsets = rows.column("queue_offset").to_pylist()
        return min(offsets) if offsets else None

    def _table(self, name: str) -> DeltaTable | None:
        """Return table `name`, up to date; None if it does not exist yet (lock held)."""
        table = self._tables.get(name)
        try:
            if table is None:
                location = delta_rs_location(table_location(self.warehouse, name))
                table = DeltaTable(location, storage_options=self.storage_options)
                self._tables[name] = table
            else:
                table.update_incremental()
        except TableNotFoundError:
            return None
        return table
