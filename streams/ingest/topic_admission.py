"""The new topics halves may bring in, with `auto_create_topic_enable` on (finding 7).

Every topic a half names becomes a table that every start fences, a metric label and a tally
entry, so the decision query lets in at most `max_topics` topics in the warehouse and
`max_topics_per_group` brought in by one producer group. A valid half naming a new topic past
either is quarantined (`refusal_texts` say why) and the stream goes on, as with any bad
record; the REST ingress refuses such a half before it reaches Kafka (403 topic_limit).

The rule runs in the ingest's JVM twin (`txcoord.TopicAdmission`, streams/jvm/), per record;
this is its driver side. What a batch knows is set before its job runs, and is a function of
the warehouse as the batches before it left it:

- at start, the rows of `system/known_topics` and the topic tables (delta_tables/
  known_topics.py); a batch replayed after a crash does not know the rows it wrote itself (of
  this app id, its batch or later), nor those topics' tables, which its deliveries made
  after the rows: it knows exactly what its first attempt knew, and decides alike;
- after each batch, the new topics it let in: the topics of its valid halves that it did not
  know, each with the group of its first half by ingress position; appended to
  `system/known_topics` (marked with the batch, so a replay writes them once) before the
  batch writes anything else.

Within a batch each ingress partition gets a share of the room (txcoord.TopicAdmission says
why and what it costs); `refusals` below is the readable model of that rule, which
tests/streams/ingest/test_topic_admission.py holds against the twin.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from delta_tables import known_topics
from streams.ingest.rules import KIND_HALF, topic_limit_messages
from streams.writes.arrow_rows import arrow_schema
from streams.writes.delta_writes import BatchLedger

__all__ = ["Limits", "TopicAdmission", "refusals"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """The topic limits of a configuration, and the partitions each batch's room is shared by."""

    max_topics: int
    max_per_group: int
    partitions: int

    @classmethod
    def of(cls, config: Config) -> Limits:
        """Return the limits `config` sets (kafka.partitions: a half topic's partitions)."""
        return cls(config.max_topics, config.max_topics_per_group, config.kafka.partitions)


def _share(room: int, partitions: int) -> int:
    return 0 if room <= 0 else -(-room // max(1, partitions))


def refusals(
    known: Mapping[str, str | None],
    halves: Iterable[tuple[str, int, str, str]],
    limits: Limits,
) -> list[str | None]:
    """Return, for each valid half (source topic, partition, group, topic) of one batch in
    ingress order, the limit it is refused by ("max_topics", "max_topics_per_group") or None
    when it passes, given the `known` topics (topic -> the group that brought it in, None if
    unknown): the readable model of the JVM twin."""
    per_group: dict[str, int] = {}
    for group in known.values():
        if group:
            per_group[group] = per_group.get(group, 0) + 1
    room = limits.max_topics - len(known)
    taken: dict[tuple[str, int], set[str]] = {}
    taken_by_group: dict[tuple[str, int], dict[str, int]] = {}
    found: list[str | None] = []
    for source, partition, group, topic in halves:
        here = taken.setdefault((source, partition), set())
        groups = taken_by_group.setdefault((source, partition), {})
        group_room = limits.max_per_group - per_group.get(group, 0)
        if topic in known or topic in here:
            found.append(None)
        elif len(here) >= _share(room, limits.partitions):
            found.append("max_topics")
        elif groups.get(group, 0) >= _share(group_room, limits.partitions):
            found.append("max_topics_per_group")
        else:
            here.add(topic)
            groups[group] = groups.get(group, 0) + 1
            found.append(None)
    return found


class TopicAdmission:
    """The coordinator writer's side of the topic limits: what each batch knows, and the rows
    of `system/known_topics` it adds (see the module docstring)."""

    def __init__(self, spark: SparkSession, config: Config, app_id: str) -> None:
        self.warehouse = config.warehouse
        self.log_retention = config.streams.log_retention
        self.app_id = app_id
        self.limits = Limits.of(config)
        limit, group_limit = topic_limit_messages(config.max_topics, config.max_topics_per_group)
        #: The twin's holder: serialized into every task of the next batch.
        self.jvm: Any = spark._jvm.txcoord.TopicAdmission(  # type: ignore[union-attr]
            self.limits.max_topics,
            self.limits.max_per_group,
            self.limits.partitions,
            limit,
            group_limit,
        )
        self._rows: list[known_topics.KnownTopic] = []
        self._folders: set[str] = set()
        self._known: dict[str, str | None] | None = None  # from the first batch on

    def prepare(self) -> None:
        """Read what the warehouse knows (before the query starts: no batch waits for it)."""
        self._rows = known_topics.rows(self.warehouse)
        self._folders = known_topics.topic_folders(self.warehouse)

    def before_batch(self, batch_id: int) -> None:
        """Set what batch `batch_id` knows, before its job runs (only the first batch after a
        start has anything to set: later ones know what `record` added)."""
        if self._known is not None:
            return
        own = {
            row.topic
            for row in self._rows
            if row.app_id == self.app_id and row.batch_id >= batch_id
        }
        known: dict[str, str | None] = dict.fromkeys(self._folders - own)
        for row in self._rows:
            if row.topic not in own and known.get(row.topic) is None:
                known[row.topic] = row.producer_group
        if own:
            log.info(
                "batch %d is replayed: the %d topic(s) it let in before are new to it again",
                batch_id,
                len(own),
            )
        self._known = known
        self._push()

    def record(
        self, spark: SparkSession, records: pa.Table, batch_id: int, ledger: BatchLedger
    ) -> None:
        """Append the new topics batch `batch_id` let in (its `records`: the parsed ingress
        records, streams/ingest/transforms.py's columns) to `system/known_topics`; they are known
        from the next batch on."""
        assert self._known is not None, "before_batch comes first"
        rows = self.new_rows(records, batch_id)
        if rows.num_rows == 0:
            return
        location = known_topics.TABLE.path(self.warehouse)
        # Created by its first rows where a start made no system tables (a rebuild finishing
        # a batch of a warehouse older than the table), as a new topic's table is.
        ledger.append(
            rows,
            location,
            batch_id,
            spark,
            creating=known_topics.TABLE,
            log_retention=self.log_retention,
        )
        for topic, group in zip(
            rows["topic"].to_pylist(), rows["producer_group"].to_pylist(), strict=True
        ):
            self._known[topic] = group
        self._push()
        log.info(
            "%d new topic(s) let in (%d known of max_topics %d): %s",
            rows.num_rows,
            len(self._known),
            self.limits.max_topics,
            ", ".join(rows["topic"].to_pylist()[:10]),
        )

    def new_rows(self, records: pa.Table, batch_id: int) -> pa.Table:
        """Return the rows of `system/known_topics` for the topics `records` bring in."""
        known = self._known or {}
        half = pc.and_(pc.is_null(records["reason"]), pc.equal(records["ingress_kind"], KIND_HALF))
        valid = records.filter(
            pc.and_(half, pc.invert(pc.fill_null(records["is_tick"], False)))
        ).sort_by(
            [
                ("source_topic", "ascending"),
                ("source_partition", "ascending"),
                ("source_offset", "ascending"),
            ]
        )
        first: dict[str, str] = {}
        for topic, group in zip(
            valid["topic"].to_pylist(), valid["producer_group"].to_pylist(), strict=True
        ):
            if topic not in known and topic not in first:
                first[topic] = group
        now = datetime.now(UTC)
        return pa.Table.from_pylist(
            [
                {
                    "topic": topic,
                    "producer_group": group,
                    "admitted_at": now,
                    "app_id": self.app_id,
                    "batch_id": batch_id,
                }
                for topic, group in sorted(first.items())
            ],
            schema=arrow_schema(known_topics.SCHEMA),
        )

    def _push(self) -> None:
        self.jvm.setKnown(json.dumps(self._known))
