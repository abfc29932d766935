"""An engine stopped longer than its ingress topics keep records says so at start."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka.admin import ConfigResource, ConfigResourceType
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from coordinator.kafka_clients.admin import admin_client, ensure_topic
from streams.kafka_io.outage import last_commit_ms, outage_warning, topic_retention_ms
from tests.streams.conftest import ConfigFactory

HOUR = 3_600_000
NOW = 1_800_000_000_000


def test_no_warning_for_a_new_checkpoint() -> None:
    assert outage_warning(None, {"txcoord.op": 60_000}, NOW) is None


def test_no_warning_within_every_retention() -> None:
    assert outage_warning(NOW - 2 * HOUR, {"h": 3 * HOUR, "o": -1}, NOW) is None


def test_a_longer_outage_names_the_topic_that_keeps_records_least() -> None:
    warning = outage_warning(NOW - 50 * HOUR, {"h": 48 * HOUR, "o": 24 * HOUR, "x": -1}, NOW)
    assert warning is not None
    assert "50.0 h ago" in warning
    assert "topic o keeps records (retention.ms=86400000, 24.0 h)" in warning
    assert "deleted unread" in warning


def test_the_last_commit_is_read_from_the_checkpoint(spark: SparkSession, tmp_path: Path) -> None:
    checkpoint = tmp_path / "coordinator"
    assert last_commit_ms(spark, str(checkpoint)) is None
    (checkpoint / "commits").mkdir(parents=True)
    for batch, seconds in ((0, 1_700_000_000), (1, 1_700_000_600), (2, 1_700_000_300)):
        (checkpoint / "commits" / str(batch)).write_text("v1\n{}\n")
        os.utime(checkpoint / "commits" / str(batch), (seconds, seconds))
    assert last_commit_ms(spark, str(checkpoint)) == 1_700_000_600_000


@pytest.mark.kafka
def test_retention_is_read_from_the_broker(make_config: ConfigFactory) -> None:
    config: Config = make_config()
    bootstrap = config.kafka.bootstrap_servers
    ensure_topic(bootstrap, config.kafka.half_topic, 1, {"retention.ms": "123456789"})
    ensure_topic(bootstrap, config.kafka.op_topic, 1, {"retention.ms": "-1"})
    topics = [config.kafka.half_topic, config.kafka.op_topic]
    with admin_client(bootstrap) as admin:
        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic) for topic in topics]
        )
    assert topic_retention_ms(described, topics) == {
        config.kafka.half_topic: 123456789,
        config.kafka.op_topic: -1,
    }
