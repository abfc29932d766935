"""One consumer-group member as a process of its own, for the tests that kill one (kill -9).

    python -m tests.coordinator.sdk.consumer.member_process SETTINGS_JSON LOG_PATH

Runs an orderly PushConsumer whose listener appends one line per message it handles,
`transaction_id queue_id queue_offset delivery_attempt`, written with one os.write (a kill
loses no line it reported), then succeeds. SIGTERM shuts the consumer down cleanly (it
stores its offsets and leaves the group); "ready" is printed once it is a member.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

from coordinator.sdk.consumer import ConsumeResult, MessageListener, MessageView, PushConsumer


class Recorder(MessageListener):
    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def consume(self, message: MessageView) -> ConsumeResult:
        line = (
            f"{message.transaction_id} {message.queue_id} {message.queue_offset} "
            f"{message.delivery_attempt}\n"
        )
        os.write(self._fd, line.encode())
        return ConsumeResult.SUCCESS


def main() -> None:
    settings = json.loads(sys.argv[1])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer = PushConsumer(
        settings.pop("group"),
        settings.pop("topics"),
        Recorder(sys.argv[2]),
        orderly=True,
        **settings,
    ).start()
    while not consumer.consumer.members and not stop.is_set():
        time.sleep(0.1)
    print("ready", flush=True)
    stop.wait()
    consumer.shutdown()


if __name__ == "__main__":
    main()
