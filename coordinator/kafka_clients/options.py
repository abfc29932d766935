"""What every Kafka client of the product is built with: its security, and recovery.

kafka-python waits between attempts to reach a broker it lost for an exponentially growing
backoff, up to `reconnect_backoff_max_ms`: 30 s by default. After a broker restart a client
could then stay away for that long: in the kill -9 test a check listener read its checks
only after the third had been sent, and its transactions were rightly discarded; the
ticker (event time stalls), the REST ingress's check poller and the SDK's check listener
do the same (docs/security.md has the figures).
Kafka's Java client, the one Spark uses, caps the backoff at 1 s (`reconnect.backoff.max.ms`);
every kafka-python client of the product does too.

librdkafka (confluent-kafka: the REST ingress's writer and the engine's check publisher)
backs off up to 10 s by default; it is capped alike.

Small: no kafka-python or confluent-kafka import at module level, so the SDK uses it as is
(`kafka_python_options` loads kafka-python's mend when a kafka-python client is built).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coordinator.core.kafka_security import KafkaSecurity

__all__ = [
    "COMMITTED_ONLY",
    "LIBRDKAFKA_RECOVERY",
    "RECOVERY",
    "kafka_python_options",
    "librdkafka_options",
]

#: What every kafka-python reader of the engine's check and deliveries topics is built with.
#: The engine writes them in Kafka transactions (streams/kafka_io/kafka_fence.py): what a
#: coordinator fenced by a newer one sent in a transaction it could not commit is aborted, and only
#: a read_committed reader drops it. kafka-python reads uncommitted by default (librdkafka and
#: Kafka's Java client read committed).
COMMITTED_ONLY: Mapping[str, str] = {"isolation_level": "read_committed"}

#: Reconnect like Kafka's Java client (reconnect.backoff.ms 50, reconnect.backoff.max.ms 1000).
RECOVERY: Mapping[str, int] = {"reconnect_backoff_ms": 50, "reconnect_backoff_max_ms": 1000}


def kafka_python_options(security: KafkaSecurity | None = None) -> dict[str, Any]:
    """Return the keyword arguments every kafka-python client of the product is built with.

    The client about to be built gets kafka-python's metadata refresh and group join mended
    first (coordinator/kafka_clients/metadata_refresh.py, join_group.py); imported here, when
    kafka-python is.
    """
    from coordinator.kafka_clients import join_group, metadata_refresh  # noqa: PLC0415

    metadata_refresh.install()
    join_group.install()
    return {**RECOVERY, **(security or KafkaSecurity()).client_options()}


#: The same recovery in librdkafka's spelling (its own default backs off up to 10 s).
LIBRDKAFKA_RECOVERY: Mapping[str, int] = {
    "reconnect.backoff.ms": RECOVERY["reconnect_backoff_ms"],
    "reconnect.backoff.max.ms": RECOVERY["reconnect_backoff_max_ms"],
}


def librdkafka_options(security: KafkaSecurity | None = None) -> dict[str, Any]:
    """Return the properties every confluent-kafka client of the product is built with."""
    return {**LIBRDKAFKA_RECOVERY, **(security or KafkaSecurity()).librdkafka_options()}
