"""The ingress and check topics: created with the settings the protocol depends on."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from kafka.admin import ConfigResource, ConfigResourceType

from coordinator.core.config import Config
from coordinator.core.errors import ConfigurationError, TxcoordError
from coordinator.kafka_clients.admin import admin_client, ensure_configured_topic
from coordinator.protocol.ingress import HEADER_ALLOWANCE_BYTES
from streams.kafka_io.check_topic import ensure_check_topic


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


def prepare_ingress_topics(config: Config) -> None:
    """`ensure_ingress_topics` for a service about to take sends (the REST ingress, the gRPC
    endpoint): any failure is a TxcoordError that names the brokers, so the service refuses
    to start with one clear line instead of a traceback."""
    try:
        # The ingest needs them with LogAppendTime: never let a send create them.
        ensure_ingress_topics(config)
    except TxcoordError:
        raise
    except Exception as exc:
        raise TxcoordError(
            f"cannot prepare the ingress topics on {config.kafka.bootstrap_servers}: {exc}"
        ) from exc


def subscribed_topics(config: Config, admin: Any) -> list[str]:
    """Return the ingress topics the decision query reads now (the shared ones, and in
    the per-group layout every group's), asked of the connected admin client `admin`."""
    kafka = config.kafka
    topics = {kafka.half_topic, kafka.op_topic}
    if kafka.topics_per_group:
        pattern = re.compile(kafka.layout.ingress_pattern())
        topics.update(t for t in admin.list_topics() if pattern.fullmatch(t))
    return sorted(topics)


def ingress_partitions(config: Config) -> dict[str, list[int]]:
    """Return every partition of every ingress topic the query subscribes to now."""
    kafka = config.kafka
    with admin_client(kafka.bootstrap_servers, security=kafka.security) as admin:
        described = admin.describe_topics(subscribed_topics(config, admin))
    return {  # kafka-python's metadata (field names as in its protocol)
        topic.get("topic", topic.get("name")): sorted(
            p.get("partition", p.get("partition_index")) for p in topic["partitions"]
        )
        for topic in described
    }


def ensure_group_topics(config: Config, group: str) -> tuple[str, str, str]:
    """Create `group`'s half, op and check topics (per-group layout); return their names.

    Raises ValueError if the group cannot have topics of its own (coordinator/core/topics.py), and
    ConfigurationError if an existing ingress topic is set up otherwise
    (`ingress_topic_problems`).
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
            found = described_settings(admin, topic)
            problems = ingress_topic_problems(config, topic, found)
            if problems:
                raise ConfigurationError("; ".join(problems))


#: The settings of an existing ingress topic that `ingress_topic_problems` checks.
CHECKED = ("message.timestamp.type", "min.insync.replicas", "retention.ms")
#: Seconds a topic just made may take to be described: on a cluster the broker that answers
#: may not know it yet, and answers without its settings (seen beside a CPU hog: a start that
#: had just made its op topic read "message.timestamp.type=None" and refused it for good).
DESCRIBE_BOUND = 30.0


def described_settings(
    admin: Any, topic: str, bound: float = DESCRIBE_BOUND
) -> dict[str, str | None]:
    """Return `topic`'s CHECKED settings as the broker describes them, asking again (for up
    to `bound` seconds) while its answer has no timestamp type, which every topic has."""
    deadline = time.monotonic() + bound
    while True:
        described: Any = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        found = {name: _config_value(described, topic, name) for name in CHECKED}
        if found["message.timestamp.type"] is not None or time.monotonic() >= deadline:
            return found
        time.sleep(0.5)


def ingress_topic_problems(
    config: Config, topic: str, settings: Mapping[str, str | None]
) -> list[str]:
    """Return why existing ingress topic `topic`, set up as `settings` say, cannot serve.

    A topic made by someone else (a cluster's own tooling, an earlier version) is checked for
    what the protocol depends on: the broker's clock as store time, as many in-sync copies
    as `kafka.min_insync_replicas` asks (contract 7.7: an acknowledged record survives that
    many brokers), and records kept at least `file_reserved_time` (an engine stopped longer
    than the retention would lose acknowledged records unread: docs/operations.md).
    """
    fix = f"kafka-configs --alter --entity-type topics --entity-name {topic} --add-config"
    found = []
    stamp = settings.get("message.timestamp.type")
    if stamp != "LogAppendTime":
        found.append(
            f"Kafka topic {topic} uses message.timestamp.type={stamp}; ingress topics "
            f"must use LogAppendTime ({fix} message.timestamp.type=LogAppendTime)"
        )
    insync = _number(settings.get("min.insync.replicas"))
    wanted = config.kafka.min_insync_replicas
    if insync is not None and insync < wanted:
        found.append(
            f"Kafka topic {topic} has min.insync.replicas={insync}, fewer than "
            f"kafka.min_insync_replicas={wanted}: an acknowledged record could be lost with "
            f"fewer brokers than configured ({fix} min.insync.replicas={wanted})"
        )
    retention = _number(settings.get("retention.ms"))
    floor = int(config.file_reserved_time.total_seconds() * 1000)
    if retention is not None and 0 <= retention < floor:
        keep = ingress_topic_config(config)["retention.ms"]
        found.append(
            f"Kafka topic {topic} keeps records {retention} ms (retention.ms), less than "
            f"file_reserved_time ({config.file_reserved_time}): an engine stopped that long "
            f"would lose acknowledged records unread ({fix} retention.ms={keep})"
        )
    return found


def _number(value: str | None) -> int | None:
    """Return a numeric topic setting, or None when it is absent or not a number."""
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def _config_value(described: Any, topic: str, name: str) -> str | None:
    """Return topic config `name` from kafka-python's describe_configs answer."""
    entry = described.get("topic", {}).get(topic, {}).get(name)
    return None if entry is None else str(entry.get("value"))
