"""The ingress and check topics: created with the settings the protocol depends on."""

from __future__ import annotations

from typing import Any

from kafka.admin import ConfigResource, ConfigResourceType

from core.config import Config
from core.errors import ConfigurationError
from protocol.ingress import HEADER_ALLOWANCE_BYTES
from streams.check_topic import ensure_check_topic
from streams.kafka_topics import admin_client, ensure_configured_topic


def ingress_topic_config(config: Config) -> dict[str, str]:
    """Return the topic settings the ingress topics need."""
    return {
        # The broker's clock is the store time: a producer's skewed clock can neither
        # move the watermark nor dodge the timeout (SPEC 9).
        "message.timestamp.type": "LogAppendTime",
        "max.message.bytes": str(config.max_message_size + HEADER_ALLOWANCE_BYTES),
        "retention.ms": str(int(config.file_reserved_time.total_seconds() * 1000) * 2),
    }


def ensure_ingress_topics(config: Config) -> None:
    """Create the half, op and check topics if absent; refuse ingress topics set up otherwise."""
    bootstrap = config.kafka.bootstrap_servers
    settings = ingress_topic_config(config)
    for topic in (config.kafka.half_topic, config.kafka.op_topic):
        ensure_configured_topic(config.kafka, topic, settings)
    ensure_check_topic(config)  # sized for checks of max_message_size bodies
    with admin_client(bootstrap, security=config.kafka.security) as admin:
        for topic in (config.kafka.half_topic, config.kafka.op_topic):
            described: Any = admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic)]
            )
            value = _config_value(described, topic, "message.timestamp.type")
            if value != "LogAppendTime":
                raise ConfigurationError(
                    f"Kafka topic {topic} uses message.timestamp.type={value}; ingress topics "
                    f"must use LogAppendTime (kafka-configs --alter --entity-type topics "
                    f"--entity-name {topic} --add-config message.timestamp.type=LogAppendTime)"
                )


def _config_value(described: Any, topic: str, name: str) -> str | None:
    """Return topic config `name` from kafka-python's describe_configs answer."""
    entry = described.get("topic", {}).get(topic, {}).get(name)
    return None if entry is None else str(entry.get("value"))
