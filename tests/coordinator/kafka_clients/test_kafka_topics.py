"""Topic creation takes the replication of `[kafka]`, against the real broker."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import InvalidReplicationFactorError

from coordinator.kafka_clients.admin import admin_client, delete_topic
from streams.kafka_io.ingress_topics import ensure_ingress_topics
from tests.conftest import ConfigFactory

pytestmark = pytest.mark.kafka


def test_ingress_topics_get_min_insync_replicas_from_the_configuration(
    make_config: ConfigFactory,
) -> None:
    config = make_config(**{"kafka.min_insync_replicas": "1"})
    kafka = config.kafka
    ensure_ingress_topics(config)
    try:
        with admin_client(kafka.bootstrap_servers) as admin:
            for topic in (kafka.half_topic, kafka.op_topic, kafka.check_topic):
                described: Any = admin.describe_configs(
                    [ConfigResource(ConfigResourceType.TOPIC, topic)]
                )
                entry = described["topic"][topic]["min.insync.replicas"]
                assert entry["value"] == "1"
                assert entry["config_source"] == "DYNAMIC_TOPIC_CONFIG"  # set by us
    finally:
        for topic in (kafka.half_topic, kafka.op_topic, kafka.check_topic):
            delete_topic(kafka.bootstrap_servers, topic)


def test_a_replication_factor_the_cluster_cannot_meet_is_refused_by_the_broker(
    make_config: ConfigFactory,
) -> None:
    config = make_config(**{"kafka.replication_factor": "2"})  # one broker only
    with pytest.raises(InvalidReplicationFactorError):
        ensure_ingress_topics(config)
