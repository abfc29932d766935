"""The bench's consumer, a process of its own: when each message reached a consumer.

    python -m coordinator.bench.consumer_process SETTINGS_JSON OUT_FILE

A SimpleConsumer (coordinator/sdk/consumer/) of one group reads the topic from its first
message, acknowledges each message and notes when `receive` returned it (epoch ms). On
SIGTERM it stops, closes the consumer and writes `{"received": {transaction id: ms},
"deliveries": n}` to OUT_FILE. A process of its own, as a consumer application is: in the
bench's process it would share the interpreter with the engine's driver.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time

from coordinator.sdk.consumer import SimpleConsumer


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
    try:
        while not stop.is_set():
            for message in consumer.receive(max_messages=256, wait_seconds=0.2):
                at = time.time_ns() // 1_000_000
                deliveries += 1
                received.setdefault(message.transaction_id, at)
                consumer.ack(message)
    finally:
        consumer.close()
        with open(sys.argv[2], "w") as out:
            json.dump({"received": received, "deliveries": deliveries}, out)


if __name__ == "__main__":
    main()
