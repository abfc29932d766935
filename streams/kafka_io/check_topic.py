"""The check topic: its records, and a size that every half the ingress accepts fits into.

A check request carries the half's body (base64 in JSON: 4 bytes per 3) so that a producer
can answer from it. The ingress accepts bodies up to `max_message_size` (4 MiB by default,
at most 64 MiB), so a check record is up to ~4/3 of that plus the message's other fields:
far above Kafka's 1 MiB defaults (the topic's `max.message.bytes`, the producers'
`max_request_size` / `message.max.bytes`). The topic and the coordinator's producer are
therefore sized from `max_message_size` (`check_record_limit`), and an existing check topic
set up smaller is raised at start (or refused with the command that fixes it, when this
principal may not alter it).

Consumers need no setting: since Kafka 0.10.1 (KIP-74) a fetch returns the first record batch
of a partition whole even when it is larger than `max.partition.fetch.bytes` /
`fetch.max.bytes`, so a consumer with kafka-python's defaults still receives the record
(tests/streams/kafka_io/test_check_topic.py).

A record that still cannot be published (fields far larger than the allowance, or a broker
that refuses it anyway) must not fail the coordinator's batch forever: it is published
*slim*, without the body, keys, tags and properties, with `omitted` naming what was left
out, `omitted_reason` saying why and `body_size`; the whole message stays in
`system/check_requests` (same transaction id and check number). The producer still learns
that it must answer, which is what a check is for.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka.admin import ConfigResource, ConfigResourceType

from coordinator.core.config import Config
from coordinator.core.errors import ConfigurationError
from coordinator.kafka_clients.admin import admin_client, ensure_configured_topic
from coordinator.protocol.check_record import CheckRecord, Record, instance_of
from delta_tables import check_requests

log = logging.getLogger(__name__)

#: Room for the check record's fields other than the body: the half's keys, tags and
#: properties (at most the ingress topics' header allowance, 256 KiB, before JSON escaping)
#: and the ids and numbers around them.
FIELDS_ALLOWANCE_BYTES = 512 * 1024
#: Kafka's own framing of one record in a batch (batch header, varints, header keys).
RECORD_OVERHEAD_BYTES = 16 * 1024


def check_record_limit(max_message_size: int) -> int:
    """Return the largest check record (key + value + headers) the coordinator publishes."""
    return -(-max_message_size // 3) * 4 + FIELDS_ALLOWANCE_BYTES


def check_topic_max_bytes(max_message_size: int) -> int:
    """Return the check topic's `max.message.bytes` (and the producer's max_request_size)."""
    return check_record_limit(max_message_size) + RECORD_OVERHEAD_BYTES


def record_bytes(record: Record) -> int:
    """Return the payload size of `record`: key, value and headers."""
    key, value, headers = record
    return len(key) + len(value) + sum(len(name) + len(data) for name, data in headers)


def _check(row: Any) -> CheckRecord:
    """Return the check record of one CHECK row of the stateful stage's output.

    `row` is a Spark Row, or any mapping by name, with the stage's column names.
    """
    properties = dict(row["properties"] or {})
    return CheckRecord(
        transaction_id=row["transaction_id"],
        msg_id=row["msg_id"],
        producer_group=row["producer_group"],
        topic=row["topic"],
        queue_id=row["queue_id"],
        body=bytes(row["body"] or b""),
        keys=tuple(row["keys"] or []),
        tags=row["tags"],
        properties=properties,
        check_number=row["check_number"],
        prepared_at_ms=row["prepared_ms"],
        requested_at_ms=row["at_ms"],
        producer_instance=instance_of(properties),
    )


def check_record(row: Any) -> Record:
    """Return (key, value, headers) of the check-topic record for one CHECK row."""
    return _check(row).encode()


def slim_check_record(row: Any, reason: str) -> Record:
    """Return the check record without the message's body, keys, tags and properties."""
    return _check(row).slim(reason, message_in=check_requests.TABLE.name).encode()


def publishable_record(row: Any, limit: int) -> Record:
    """Return the check record of `row`, slim if the full one is larger than `limit` bytes."""
    record = check_record(row)
    size = record_bytes(record)
    if size <= limit:
        return record
    reason = f"the check record is {size} bytes, more than the check topic's {limit}"
    log.warning(
        "check %s of %s/%s published without its message: %s",
        row["check_number"],
        row["producer_group"],
        row["transaction_id"],
        reason,
    )
    return slim_check_record(row, reason)


def ensure_check_topic(config: Config, topic: str | None = None) -> None:
    """Create a check topic (default: the shared one) sized for `max_message_size`.

    An existing one set up smaller is raised. Raises ConfigurationError when the topic is
    too small and cannot be altered (a secured cluster where this principal lacks
    AlterConfigs on it), naming the command that fixes it.
    """
    bootstrap, topic = config.kafka.bootstrap_servers, topic or config.kafka.check_topic
    needed = check_topic_max_bytes(config.max_message_size)
    setting = {"max.message.bytes": str(needed)}
    if ensure_configured_topic(config.kafka, topic, setting):
        return
    with admin_client(bootstrap, security=config.kafka.security) as admin:
        resource = ConfigResource(ConfigResourceType.TOPIC, topic, {"max.message.bytes": None})
        described: Any = admin.describe_configs([resource], config_filter="all")
        entry = described.get("topic", {}).get(topic, {}).get("max.message.bytes")
        current = int(entry["value"]) if entry and entry.get("value") is not None else 0
        if current >= needed:
            return
        try:
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, setting)])
        except Exception as exc:
            raise ConfigurationError(
                f"Kafka topic {topic} has max.message.bytes={current}, but check requests of "
                f"max_message_size ({config.max_message_size} bytes) need {needed}, and "
                f"altering it failed ({exc}): kafka-configs --alter --entity-type topics "
                f"--entity-name {topic} --add-config max.message.bytes={needed}"
            ) from exc
    log.info("check topic %s: max.message.bytes raised from %d to %d", topic, current, needed)
