"""The SDK's check listener answers again after a broker's kill -9 and restart.

A producer application's listener is what keeps a checked transaction alive: while it is
away, checks go unanswered and the transaction is discarded after `check_max` of them. So
its Kafka clients retry a lost broker at most a second apart, as Kafka's Java client does
(coordinator/kafka_clients/options.py): with kafka-python's own default (up to 30 s) a listener read
its
checks 40 s late.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from coordinator.kafka_clients.admin import ensure_topic
from coordinator.kafka_clients.options import RECOVERY
from coordinator.runtime.local_stack.kafka_broker import BrokerSettings, KafkaBroker
from coordinator.runtime.local_stack.ports import free_port
from coordinator.sdk import TransactionProducer
from coordinator.sdk.kafka_transport import KafkaTransport
from tests.conftest import unavailable

from .conftest import INGRESS_TOPIC_CONFIG, publish, read_records
from .helpers import RecordingListener, State, wait_until
from .test_kafka_transport import check_of

pytestmark = [pytest.mark.kafka, pytest.mark.long]

#: Seconds from the broker being back to the answer of a check published then: a deadline
#: that says the listener came back at all. How soon is a performance figure, which a loaded
#: machine moves by seconds. The retry pace that makes it soon is asserted as the clients'
#: setting: no wall-clock bound could tell the two backoffs apart, since where kafka-python's
#: default retries fall around the restart is chance.
ANSWERED_WITHIN = 60


def answers(servers: str, topic: str, count: int) -> set[str]:
    return {r.key.decode() for r in read_records(servers, topic, count, timeout=1, settle=0)}


def test_the_check_listener_answers_soon_after_a_broker_restart(tmp_path: Path) -> None:
    broker = KafkaBroker(
        BrokerSettings(tmp_path / "kafka", port=free_port(), controller_port=free_port())
    )
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
            listener=RecordingListener(check=lambda r: State.COMMIT_MESSAGE),
            group=group,
            bootstrap_servers=servers,
            half_topic="half",
            op_topic="op",
            check_topic="check",
            poll_wait_seconds=0.2,
        )
        producer.start()
        # The contract behind "soon": both clients of the SDK's transport retry a lost broker
        # at most a second apart.
        transport = producer._transport
        assert isinstance(transport, KafkaTransport)
        for client in (transport._producer, transport._consumer):
            assert {key: client.config[key] for key in RECOVERY} == dict(RECOVERY)
        publish(servers, "check", [check_of("tx-before", group)])
        wait_until(
            lambda: answers(servers, "op", 1) == {"tx-before"},
            timeout=60,
            what="the answer before the restart",
        )

        broker.kill()
        # The scenario, not a synchronisation: the broker stays away long enough for
        # kafka-python's default backoff to have grown to ~10 s.
        time.sleep(12)
        broker.start()  # returns once the broker answers
        publish(servers, "check", [check_of("tx-after", group)])
        wait_until(
            lambda: "tx-after" in answers(servers, "op", 2),
            timeout=ANSWERED_WITHIN,
            what="the answer after the restart",
        )
    finally:
        if producer is not None:
            producer.shutdown()
        broker.stop()
