"""`system/known_topics`: the topics halves brought in, and by which producer group.

With `auto_create_topic_enable` a half may name a topic nobody created; each such topic costs
a table, a metric label and a tally entry for good, so their number is bounded: `max_topics`
in the warehouse, `max_topics_per_group` brought in by one producer group (issue 61, finding
7). The coordinator appends a row here for each new topic a batch lets in, in the batch that
landed its first half (streams/ingest/topic_admission.py), before the batch delivers anything: a
topic's table never exists without its row, once this table does. The row names the group
of that first half (the first by ingress position), and the writer's app id and batch, so a
batch replayed after a crash knows which rows were its own (they are not yet known to it).

The rows are a cache of the warehouse, as every checkpoint is: the first valid half of each
topic in `system/half_messages` says the same. Topic tables made before this table existed
have no row; `known_topics` counts them too, their group unknown. The REST ingress reads
both to refuse a new topic past the limits before it reaches Kafka (coordinator/rest/
topic_limits.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from coordinator.protocol.deliveries import delta_rs_location
from coordinator.protocol.names import topic_name_problem
from delta_tables.object_store import filesystem, listing
from delta_tables.table import TableSpec, listed_version

SCHEMA = StructType(
    [
        StructField("topic", StringType(), nullable=False),
        StructField("producer_group", StringType(), nullable=False),
        StructField("admitted_at", TimestampType(), nullable=False),
        StructField("app_id", StringType(), nullable=False),
        StructField("batch_id", LongType(), nullable=False),
    ]
)

TABLE = TableSpec(
    name="system/known_topics",
    schema=SCHEMA,
    description="Topics brought in by halves (auto_create_topic_enable): which group, when",
    stats_columns=("topic", "app_id", "batch_id"),
)


@dataclass(frozen=True)
class KnownTopic:
    """One row: a topic, the group of its first half, and the batch that let it in."""

    topic: str
    producer_group: str
    app_id: str
    batch_id: int


def rows(warehouse: str) -> list[KnownTopic]:
    """Return the rows of the table (none before it exists)."""
    location = TABLE.path(warehouse)
    if listed_version(location) is None:
        return []
    try:
        table = DeltaTable(delta_rs_location(location))
    except TableNotFoundError:
        return []
    data = table.to_pyarrow_table(columns=["topic", "producer_group", "app_id", "batch_id"])
    return [
        KnownTopic(row["topic"], row["producer_group"], row["app_id"], row["batch_id"])
        for row in data.to_pylist()
    ]


def topic_folders(warehouse: str) -> set[str]:
    """Return the topics with a folder under `topics/` (one listing; names that are not
    topic names, which registry.py sets aside, left out)."""
    fs, root = filesystem(warehouse)
    folders = listing(fs, f"{root}/topics")
    return {
        info.base_name
        for info in folders
        if info.type == pafs.FileType.Directory and topic_name_problem(info.base_name) is None
    }


def known_topics(warehouse: str) -> dict[str, str | None]:
    """Return every topic the warehouse knows: topic -> the group that brought it in (None
    for a topic table older than this table's row of it)."""
    found: dict[str, str | None] = dict.fromkeys(topic_folders(warehouse))
    for row in rows(warehouse):
        if found.get(row.topic) is None:
            found[row.topic] = row.producer_group
    return found
