"""CPU of the SDK's Kafka transport answering check requests: one send per answer, or together.

The SDK's check loop (coordinator/sdk/check_answerer.py) answers checks from a pool of
workers. Sent one by one, each answer is a produce request of its own that the caller waits
for, and kafka-python's network code costs about a millisecond of CPU per request; sent
together (`KafkaTransport.send_ops`, what the check loop does now) many answers share a
request. This starts a throw-away local broker and stores N answers (op records with
from_check=true) through one KafkaTransport, first as four threads each sending one at a
time (the check loop before), then in calls of 50 and of 500; it prints the CPU of this
process per answer and the answers per second.

    .venv/bin/python bench/check_answers.py [N]     # default 5,000; about a minute
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic

from coordinator.runtime.local_stack.kafka_broker import BrokerSettings, KafkaBroker
from coordinator.sdk.kafka_transport import KafkaTransport

#: The check loop's workers in the bench's responder (coordinator/bench/responder.py).
WORKERS = 4


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _transport(bootstrap: str) -> KafkaTransport:
    names = [f"{kind}-{uuid.uuid4().hex[:8]}" for kind in ("half", "op", "check")]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, 4, 1) for name in names])
    admin.close()
    transport = KafkaTransport(
        bootstrap, "answers", half_topic=names[0], op_topic=names[1], check_topic=names[2]
    )
    transport.send_op("warm-up", "COMMIT", from_check=True)  # connections and metadata
    return transport


def measure(bootstrap: str, count: int, together: int | None) -> None:
    """Store `count` answers, one per send (`together` None) or `together` per call."""
    transport = _transport(bootstrap)
    ids = [f"tx-{number}" for number in range(count)]
    started, cpu = time.monotonic(), _cpu()
    if together is None:
        with ThreadPoolExecutor(WORKERS) as pool:
            list(pool.map(lambda tx: transport.send_op(tx, "COMMIT", from_check=True), ids))
        label = f"one per send, {WORKERS} threads"
    else:
        for start in range(0, count, together):
            results = transport.send_ops(
                [(tx, "COMMIT", True) for tx in ids[start : start + together]]
            )
            failed = [result for result in results if isinstance(result, Exception)]
            if failed:
                raise failed[0]
        label = f"{together} per call"
    spent, elapsed = _cpu() - cpu, time.monotonic() - started
    transport.close()
    print(
        f"{label:>26}: {spent / count * 1000:.3f} ms CPU per answer, "
        f"{count / elapsed:,.0f} answers/s"
    )


def main(count: int) -> None:
    """Measure each way against one fresh broker."""
    with (
        tempfile.TemporaryDirectory() as folder,
        KafkaBroker(BrokerSettings(data_dir=Path(folder) / "broker")) as broker,
    ):
        for together in (None, 50, 500):
            measure(broker.bootstrap_servers, count, together)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5_000)
