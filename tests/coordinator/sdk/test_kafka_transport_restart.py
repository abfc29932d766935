"""The SDK's check listener answers again within seconds of a broker's kill -9 and restart.

A producer application's listener is what keeps a checked transaction alive: while it is
away, checks go unanswered and the transaction is discarded after `check_max` of them.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from coordinator.local_stack.kafka_broker import BrokerSettings, KafkaBroker, free_port
from coordinator.sdk import TransactionProducer
from streams.kafka_topics import ensure_topic
from tests.conftest import unavailable

from .conftest import INGRESS_TOPIC_CONFIG, publish, read_records
from .helpers import RecordingListener, State, wait_until
from .test_kafka_transport import check_of

pytestmark = [pytest.mark.kafka, pytest.mark.long(0.5)]

#: Seconds from the broker being back to the answer of a check published then: the consumer
#: reconnects at most a second apart (core/kafka_clients.py) and rejoins its group: well
#: under this bound, which kafka-python's default backoff (up to 30 s) may exceed.
ANSWERED_WITHIN = 10


def answers(servers: str, topic: str, count: int) -> set[str]:
    return {r.key.decode() for r in read_records(servers, topic, count, timeout=1, settle=0)}


def test_the_check_listener_answers_soon_after_a_broker_restart(tmp_path: Path) -> None:
    broker = KafkaBroker(BrokerSettings(tmp_path / "kafka", port=free_port(),
                                        controller_port=free_port()))  # fmt: skip
    try:
        broker.start()
    except Exception as exc:
        unavailable("Kafka", exc)
    producer = None
    try:
        servers, group = broker.bootstrap_servers, "orders"
        for topic in ("half", "op"):
            ensure_topic(servers, topic, 2, INGRESS_TOPIC_CONFIG)
        ensure_topic(servers, "check", 2)
        producer = TransactionProducer(
            listener=RecordingListener(check=lambda r: State.COMMIT_MESSAGE), group=group,
            bootstrap_servers=servers, half_topic="half", op_topic="op", check_topic="check",
            poll_wait_seconds=0.2,
        )  # fmt: skip
        producer.start()
        publish(servers, "check", [check_of("tx-before", group)])
        wait_until(lambda: answers(servers, "op", 1) == {"tx-before"}, timeout=60,
                   what="the answer before the restart")  # fmt: skip

        broker.kill()
        time.sleep(12)  # long enough for kafka-python's default backoff to reach ~10 s
        broker.start()  # returns once the broker answers
        ready = time.monotonic()
        publish(servers, "check", [check_of("tx-after", group)])
        wait_until(lambda: "tx-after" in answers(servers, "op", 2), timeout=90,
                   what="the answer after the restart")  # fmt: skip
        took = time.monotonic() - ready
        assert took <= ANSWERED_WITHIN, f"answered {took:.1f} s after the broker was back"
    finally:
        if producer is not None:
            producer.shutdown()
        broker.stop()
