"""The topic limits: the JVM twin agrees with the readable model, and a batch knows what it
should, a replayed one included (streams/ingest/topic_admission.py, txcoord.TopicAdmission).

The twin sees random batches of valid halves (a few partitions, groups and topics, some
known before) with random limits, each source partition's records in one task in offset
order, as the Kafka source hands them; every half must be refused exactly when `refusals`
says, and by the same limit. The driver's side is checked against a real warehouse table.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from coordinator.core.topics import TopicLayout
from coordinator.protocol import ingress as fmt
from delta_tables import known_topics, topics
from streams.ingest.rules import IngestRules, topic_limit_messages
from streams.ingest.topic_admission import Limits, TopicAdmission, refusals
from streams.ingest.transforms import parse
from tests.conftest import ConfigFactory
from tests.coordinator.rest.delta_io import append

pytestmark = pytest.mark.spark

KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>"
)
SOURCE = "h"
RULES = IngestRules(
    layout=TopicLayout(half=SOURCE, op="o"),
    max_message_size=1024,
    default_queue_count=4,
    max_check_immunity_seconds=3600,
)
GROUPS = ["g1", "g2", "g3"]
TOPICS = [f"T{n}" for n in range(8)]


def records(spark: SparkSession, halves: list[tuple[int, str, str]], partitions: int) -> Any:
    """Return the Kafka source's rows of valid halves (partition, group, topic), offsets in
    the order given, each partition in one task, in offset order."""
    now = datetime.now(UTC)
    rows = [
        (f"tx-{offset}".encode(), b"body", SOURCE, partition, offset, now, 1,
         [(fmt.PRODUCER_GROUP, group.encode()), (fmt.TOPIC, topic.encode())])
        for offset, (partition, group, topic) in enumerate(halves)
    ]  # fmt: skip
    frame = spark.createDataFrame(rows, KAFKA_SCHEMA)
    return frame.repartition(partitions, "partition").sortWithinPartitions("offset")


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[str, str | None], list[tuple[int, str, str]], Limits]:
    partitions = draw(st.integers(1, 3))
    known_names = draw(st.lists(st.sampled_from(TOPICS), max_size=4, unique=True))
    known = {t: draw(st.one_of(st.none(), st.sampled_from(GROUPS))) for t in known_names}
    max_topics = draw(st.integers(1, 10))
    limits = Limits(max_topics, draw(st.integers(1, max_topics)), partitions)
    halves = draw(
        st.lists(
            st.tuples(
                st.integers(0, partitions - 1), st.sampled_from(GROUPS), st.sampled_from(TOPICS)
            ),
            min_size=1,
            max_size=25,
        )
    )
    return known, halves, limits


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(scenario=scenarios())
def test_the_twin_refuses_exactly_what_the_model_refuses(
    spark: SparkSession,
    scenario: tuple[dict[str, str | None], list[tuple[int, str, str]], Limits],
) -> None:
    known, halves, limits = scenario
    too_many, too_many_of_group = topic_limit_messages(limits.max_topics, limits.max_per_group)
    holder = spark._jvm.txcoord.TopicAdmission(  # type: ignore[union-attr]
        limits.max_topics, limits.max_per_group, limits.partitions, too_many, too_many_of_group
    )
    holder.setKnown(json.dumps(known))
    parsed = parse(records(spark, halves, limits.partitions), RULES, holder)
    got = {
        row.source_offset: row.reason for row in parsed.select("source_offset", "reason").collect()
    }
    texts = {None: None, "max_topics": too_many, "max_topics_per_group": too_many_of_group}
    expected = refusals(known, [(SOURCE, p, g, t) for p, g, t in halves], limits)
    assert [got[offset] for offset in range(len(halves))] == [texts[e] for e in expected]


def test_what_a_batch_knows_changes_between_jobs(spark: SparkSession) -> None:
    """The holder is serialized into each job's tasks: what the driver sets between two jobs
    (two batches) is what the second one decides by."""
    limits = Limits(max_topics=2, max_per_group=2, partitions=1)
    holder = spark._jvm.txcoord.TopicAdmission(  # type: ignore[union-attr]
        2, 2, 1, *topic_limit_messages(2, 2)
    )
    frame = parse(records(spark, [(0, "g1", "New")], 1), RULES, holder)
    holder.setKnown('{"A": "g1", "B": "g2"}')
    assert frame.collect()[0].reason == topic_limit_messages(2, 2)[0]
    holder.setKnown('{"A": "g1"}')
    assert frame.collect()[0].reason is None
    assert refusals({"A": "g1"}, [(SOURCE, 0, "g1", "New")], limits) == [None]


def test_a_replayed_batch_knows_what_its_first_attempt_knew(
    spark: SparkSession, make_config: ConfigFactory
) -> None:
    config = make_config()
    app = "txcoord-coordinator-test"
    now = datetime.now(UTC)
    rows = [
        ("Old", "g1", "another-app", 9),  # an earlier checkpoint's: always known
        ("Mine", "g2", app, 4),  # this app's batch 4: known to batch 5
        ("Replayed", "g3", app, 5),  # written by batch 5's first attempt
    ]
    append(
        config.warehouse,
        known_topics.TABLE,
        [
            {"topic": t, "producer_group": g, "admitted_at": now, "app_id": a, "batch_id": b}
            for t, g, a, b in rows
        ],
    )
    # Tables: one older than the rows, and the one batch 5's first attempt delivered to.
    for topic in ("Legacy", "Replayed"):
        append(config.warehouse, topics.table(topic), [])
    admission = TopicAdmission(spark, config, app)
    admission.prepare()
    admission.before_batch(5)
    assert admission._known == {"Old": "g1", "Mine": "g2", "Legacy": None}
    assert admission.jvm.knownCount() == 3

    # The batch lets in the topics of its valid halves it did not know, each with the group
    # of its first half by position; invalid records and known topics add nothing.
    landed = pa.Table.from_pylist(
        [
            {"reason": None, "ingress_kind": "half", "is_tick": False, "topic": "Replayed",
             "producer_group": "g4", "source_topic": "h", "source_partition": 1,
             "source_offset": 7},
            {"reason": None, "ingress_kind": "half", "is_tick": False, "topic": "Replayed",
             "producer_group": "g3", "source_topic": "h", "source_partition": 0,
             "source_offset": 9},
            {"reason": None, "ingress_kind": "half", "is_tick": False, "topic": "Mine",
             "producer_group": "g1", "source_topic": "h", "source_partition": 0,
             "source_offset": 1},
            {"reason": "bad", "ingress_kind": "half", "is_tick": False, "topic": "Bad",
             "producer_group": "g1", "source_topic": "h", "source_partition": 0,
             "source_offset": 2},
        ]
    )  # fmt: skip
    added = admission.new_rows(landed, 5).to_pylist()
    assert [(r["topic"], r["producer_group"], r["batch_id"]) for r in added] == [
        ("Replayed", "g3", 5)
    ]
