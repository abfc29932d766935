"""A producer that failed for good is closed without raising (coordinator/kafka_clients/
producer.py `Client.close`). Pure: the librdkafka producer's calls are stood in for, since
when its fatal error surfaces from a flush is up to the timing of librdkafka's events (a gate
run saw it once, in tests/streams/kafka_io/test_fenced_kafka_writes.py)."""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaError, KafkaException

from coordinator.kafka_clients.producer import Client

FENCED = KafkaException(
    KafkaError(KafkaError._FENCED, "This instance has been fenced by a newer instance", fatal=True)
)


class _FencedProducer:
    """What a fenced transactional producer does: each call that serves events raises."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def poll(self, timeout: float) -> int:
        self.calls.append("poll")
        time.sleep(min(timeout, 0.05))
        raise FENCED

    def flush(self, timeout: float) -> int:
        self.calls.append("flush")
        raise FENCED

    def purge(self) -> None:
        self.calls.append("purge")


def test_a_fenced_producer_is_closed_without_raising() -> None:
    client = Client(
        {"bootstrap.servers": "127.0.0.1:1"}, name="fenced", log=logging.getLogger("test")
    )
    real, fenced = client.producer, _FencedProducer()
    client.producer = fenced  # type: ignore[assignment]
    client.start()
    try:
        client.close(timeout=5)  # raised the flush's KafkaException before the mend
        assert client.broken
        # It flushed what was in flight, then purged and served the last events all the same.
        assert "flush" in fenced.calls and fenced.calls[-2:] == ["purge", "poll"]
    finally:
        real.purge()
