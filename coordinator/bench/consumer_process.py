"""The bench's consumer, a process of its own: when each message reached a consumer.

    python -m coordinator.bench.consumer_process SETTINGS_JSON OUT_FILE

A SimpleConsumer (coordinator/sdk/consumer/) of one group reads the topic from its first
message, acknowledges each message and notes when `receive` returned it (epoch ms). It writes
`{"received": {transaction id: ms}, "deliveries": n}` to OUT_FILE (replaced whole) at most
every WRITE_EVERY seconds while new messages come, so that the bench sees when it has caught
up, and once more when SIGTERM stops it and it has closed the consumer. A process of its
own, as a consumer application is: in the bench's process it would share the interpreter
with the engine's driver.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

from coordinator.sdk.consumer import SimpleConsumer

#: Seconds between two writes of what was received, at most.
WRITE_EVERY = 0.5


def write(path: str, received: dict[str, int], deliveries: int) -> None:
    """Replace `path` with what was received (whole: the bench reads it meanwhile)."""
    partial = f"{path}.partial"
    with open(partial, "w") as out:
        json.dump({"received": received, "deliveries": deliveries}, out)
    os.replace(partial, path)


def main() -> None:
    settings = json.loads(sys.argv[1])
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
            if deliveries != written and time.monotonic() - last_write >= WRITE_EVERY:
                write(sys.argv[2], received, deliveries)
                written, last_write = deliveries, time.monotonic()
    finally:
        consumer.close()
        write(sys.argv[2], received, deliveries)


if __name__ == "__main__":
    main()
