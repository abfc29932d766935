"""RocketMQ 5's official Java client, as an application uses it, against the gRPC endpoint.

The application is deploy/jvm/rocketmq-peer/ (`txcoord.peer.RocketMqPeer`), compiled by the
install step against the client's jar from Maven Central (.cache/jars/rocketmq/): a
transactional producer with its TransactionChecker, and a SimpleConsumer. It prints one JSON
object a line; a JavaPeer runs it and collects them.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from coordinator.runtime.artifacts import jars

MAIN = "txcoord.peer.RocketMqPeer"


class JavaPeer:
    """One run of the peer: `args` as its command line, `home` its user.home (the client
    writes its logs under it, logs/rocketmq)."""

    def __init__(self, home: Path, *args: str) -> None:
        home.mkdir(parents=True, exist_ok=True)
        class_path = os.pathsep.join(
            str(jar) for jar in (*jars("rocketmq-peer"), *jars("rocketmq"))
        )
        command = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", f"-Duser.home={home}",
                   "-cp", class_path, MAIN, *args]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.events: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._readers = [
            threading.Thread(target=self._read_events, daemon=True),
            threading.Thread(target=self._read_errors, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_events(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def _read_errors(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.errors.append(line)

    def of(self, event: str) -> list[dict[str, Any]]:
        """Return the events named `event` so far."""
        return [e for e in list(self.events) if e["event"] == event]

    def wait_for(self, event: str, timeout: float) -> bool:
        """Wait until the peer said `event`; False if it ended or `timeout` passed first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            if self.of(event):
                return True
            time.sleep(0.1)
        return bool(self.of(event))

    def finish(self, timeout: float) -> int:
        """Wait for the peer to end (killed after `timeout`); return its exit code."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
            self.errors.append(f"(killed after {timeout} s)\n")
        for reader in self._readers:
            reader.join(10)
        return code

    def tail(self) -> str:
        """Return the end of what it said, for an assertion's message."""
        errors = [line for line in self.errors if not line.startswith("\tat ")]
        return "".join(errors[-30:]) + "\n" + "\n".join(map(str, self.events[-20:]))
