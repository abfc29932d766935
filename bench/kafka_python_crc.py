"""CPU of kafka-python sending and reading small records, native CRC-32C against pure Python.

kafka-python checks the CRC-32C of every record batch it builds or reads; with the `crc32c`
wheel (its `crc32c` extra, which txcoord's base install pulls) the checksum is C, without it
Python (`kafka/record/_crc32c.py`). This starts a throw-away local broker, then sends and
reads N 100-byte records (one partition) once with each checksum, and prints the CPU
seconds of this process for each half.

    .venv/bin/python bench/kafka_python_crc.py [N]     # default 200,000; about a minute
"""

from __future__ import annotations

import resource
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import kafka.record.default_records as records
import kafka.record.util as record_util
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.record._crc32c import crc as python_crc

from coordinator.runtime.local_stack.kafka_broker import BrokerSettings, KafkaBroker


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _produce(bootstrap: str, topic: str, count: int) -> float:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=256 * 1024)
    started = _cpu()
    for _ in range(count):
        producer.send(topic, value=b"x" * 100)
    producer.flush()
    spent = _cpu() - started
    producer.close()
    return spent


def _consume(bootstrap: str, topic: str, count: int) -> float:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    seen, started = 0, _cpu()
    while seen < count:
        for batch in consumer.poll(1000, max_records=100_000).values():
            seen += len(batch)
    spent = _cpu() - started
    consumer.close()
    return spent


def measure(bootstrap: str, count: int, label: str) -> None:
    """Send and read `count` records on a new topic; print the CPU of each."""
    topic = f"crc-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    sent = _produce(bootstrap, topic, count)
    read = _consume(bootstrap, topic, count)
    print(
        f"{label:>28}: send {sent:5.2f} s CPU ({sent / count * 1e6:4.1f} µs/record), "
        f"read {read:5.2f} s CPU ({read / count * 1e6:4.1f} µs/record)"
    )


def main(count: int) -> None:
    """Measure with the checksum kafka-python found, then with the pure-Python one."""
    native: Callable[[bytes], int] = records.calc_crc32c
    with (
        tempfile.TemporaryDirectory() as folder,
        KafkaBroker(BrokerSettings(data_dir=Path(folder) / "broker")) as broker,
    ):
        installed = "C (crc32c)" if record_util.crc32c_c is not None else "pure Python"
        measure(broker.bootstrap_servers, count, f"as installed: {installed}")
        records.calc_crc32c = python_crc  # what kafka-python does without the wheel
        try:
            measure(broker.bootstrap_servers, count, "pure Python")
        finally:
            records.calc_crc32c = native


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
