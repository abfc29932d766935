"""The ingress and check topics: created with the settings the protocol depends on."""

from __future__ import annotations

from typing import Any

from kafka.admin import ConfigResource, ConfigResourceType

from coordinator.core.config import Config
from coordinator.core.errors import ConfigurationError
from coordinator.kafka_clients.admin import admin_client, ensure_configured_topic
from coordinator.protocol.ingress import HEADER_ALLOWANCE_BYTES
from streams.check_topic import ensure_check_topic


def ingress_topic_config(config: Config) -> dict[str, str]:
    """Return the topic settings the ingress topics need."""
    return {
        # The broker's clock is the store time: a producer's skewed clock can neither
        # move the watermark nor dodge the timeout (contract 9).
        "message.timestamp.type": "LogAppendTime",
        "max.message.bytes": str(config.max_message_size + HEADER_ALLOWANCE_BYTES),
        "retention.ms": str(int(config.file_reserved_time.total_seconds() * 1000) * 2),
    }


def ensure_ingress_topics(config: Config) -> None:
    """Create the shared half, op and check topics if absent; refuse ones set up otherwise.

    In the per-group layout the shared ingress topics carry the heartbeats; each group's
    own topics are created by `ensure_group_topics`.
    """
    _ensure(config, (config.kafka.half_topic, config.kafka.op_topic), config.kafka.check_topic)


def ensure_group_topics(config: Config, group: str) -> tuple[str, str, str]:
    """Create `group`'s half, op and check topics (per-group layout); return their names.

    Raises ValueError if the group cannot have topics of its own (coordinator/core/topics.py), and
    ConfigurationError if an existing ingress topic does not use LogAppendTime.
    """
    layout = config.kafka.layout
    names = (layout.half_topic(group), layout.op_topic(group), layout.check_topic(group))
    _ensure(config, names[:2], names[2])
    return names


def ensure_operator_topic(config: Config, principal: str) -> str:
    """Create the operator topic of `principal` (per-group layout); return its name."""
    name = config.kafka.layout.operator_topic(principal)
    _ensure(config, (name,), None)
    return name


def _ensure(config: Config, ingress: tuple[str, ...], check: str | None) -> None:
    """Create the `ingress` topics and the `check` topic if absent, and verify them."""
    settings = ingress_topic_config(config)
    for topic in ingress:
        ensure_configured_topic(config.kafka, topic, settings)
    if check is not None:
        ensure_check_topic(config, check)  # sized for checks of max_message_size bodies
    with admin_client(config.kafka.bootstrap_servers, security=config.kafka.security) as admin:
        for topic in ingress:
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
