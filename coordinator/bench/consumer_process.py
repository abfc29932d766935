"""The bench's consumer, a process of its own: when each message reached a consumer.

    python -m coordinator.bench.consumer_process SETTINGS_JSON OUT_FILE

A SimpleConsumer (coordinator/sdk/consumer/) of one group reads the topic from its first
message, acknowledges each message and notes when `receive` returned it (epoch ms). It writes
`{"received": {transaction id: ms}, "deliveries": n, "state": ...}` to OUT_FILE (replaced
whole) at most every WRITE_EVERY seconds while new messages come, so that the bench sees when
it has caught up, at least every STATE_EVERY seconds meanwhile (`state`: the consumer's view
of its group and queues, SimpleConsumer.describe), and once more when SIGTERM stops it and it
has closed the consumer. The consumer's and kafka-python's group INFO lines go to OUT_FILE
with `.log` for a suffix: a consumer that received nothing says why there (two gate runs saw
one receive none of 200 in 60 s). A process of its own, as a consumer application is: in the
bench's process it would share the interpreter with the engine's driver.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from coordinator.sdk.consumer import SimpleConsumer

#: Seconds between two writes of what was received, at most.
WRITE_EVERY = 0.5
#: Seconds between two writes of the consumer's state while nothing new comes, at most.
STATE_EVERY = 5.0


def write(path: str, received: dict[str, int], deliveries: int, state: dict[str, Any]) -> None:
    """Replace `path` with what was received (whole: the bench reads it meanwhile)."""
    partial = f"{path}.partial"
    with open(partial, "w") as out:
        json.dump({"received": received, "deliveries": deliveries, "state": state}, out)
    os.replace(partial, path)


def log_to(path: str) -> None:
    """Write the consumer's and kafka-python's group INFO lines (and every WARNING) to `path`."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    for name in ("coordinator.sdk.consumer", "kafka.coordinator"):
        logging.getLogger(name).setLevel(logging.INFO)


def main() -> None:
    settings = json.loads(sys.argv[1])
    log_to(f"{sys.argv[2]}.log")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    received: dict[str, int] = {}
    deliveries = 0
    consumer = SimpleConsumer(
        settings.pop("group"), [settings.pop("topic")], start_from="first", **settings
    ).start()
    print("ready", flush=True)
    written, last_write = 0, 0.0
    try:
        while not stop.is_set():
            for message in consumer.receive(max_messages=256, wait_seconds=0.2):
                at = time.time_ns() // 1_000_000
                deliveries += 1
                received.setdefault(message.transaction_id, at)
                consumer.ack(message)
            since = time.monotonic() - last_write
            if (deliveries != written and since >= WRITE_EVERY) or since >= STATE_EVERY:
                write(sys.argv[2], received, deliveries, consumer.describe())
                written, last_write = deliveries, time.monotonic()
    finally:
        state = consumer.describe()
        consumer.close()
        write(sys.argv[2], received, deliveries, state)


if __name__ == "__main__":
    main()
