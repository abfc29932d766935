"""A consumer group under load loses a member to kill -9 and gains one (contract 5.5).

Three orderly push consumers, each a process of its own (member_process.py), read a topic
of 8 queues while transactions are committed into it; the second is killed with SIGKILL,
later a fourth joins. Then:

- every committed message was handled (none lost);
- a message handled twice was handled first by the killed member, at an offset at or above
  the last offset that member had stored for its queue: its acknowledgement was never
  committed (the only duplicates at-least-once allows; the live members hand their queues
  over without any);
- each member handled each queue in offset order: runs of consecutive offsets, each run
  starting where the group's offset stood.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer

from coordinator.core.config import Config
from coordinator.sdk.consumer.queue_reader import QueueReader
from tests.harness import Engine, Producer, kafka_members, wait_for
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

ROOT = Path(__file__).resolve().parents[4]
TOPIC = "Ledger"
QUEUES = 8
GROUP = "ledger-readers"
#: Transactions committed while the group changes, over LOAD_SECONDS.
TRANSACTIONS = 800
LOAD_SECONDS = 40


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config()


class Member:
    """One member process and the file its listener writes."""

    def __init__(self, config: Config, log: Path) -> None:
        kafka = config.kafka
        settings = {
            "group": GROUP,
            "topics": [TOPIC],
            "bootstrap_servers": kafka.bootstrap_servers,
            "warehouse": config.warehouse,
            "deliveries_topic": kafka.deliveries_topic,
            "offsets_topic": kafka.consumer_offsets_topic,
            "start_from": "first",
            "member": log.stem,
        }
        self.log = log
        self.name = log.stem
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.coordinator.sdk.consumer.member_process",
             json.dumps(settings), str(log)],
            cwd=ROOT, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.strip() == "ready", f"member {self.name} did not start: {line!r}"

    def handled(self) -> list[tuple[str, int, int, int]]:
        if not self.log.exists():
            return []
        rows = []
        for line in self.log.read_text().splitlines():
            tx, queue, offset, attempt = line.split()
            rows.append((tx, int(queue), int(offset), int(attempt)))
        return rows

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)


def load(config: Config, stop_at: float) -> list[str]:
    """Commit TRANSACTIONS transactions into TOPIC's queues, evenly until `stop_at`."""
    producer = Producer(config)
    sent = []
    try:
        start = time.monotonic()
        for i in range(TRANSACTIONS):
            tx = f"tx-{i}"
            producer.half(tx, topic=TOPIC, queue_id=i % QUEUES)
            producer.op(tx, "COMMIT")
            sent.append(tx)
            pause = start + (i + 1) * (stop_at - start) / TRANSACTIONS - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        producer.flush()
    finally:
        producer.close()
    return sent


def stored_offsets(config: Config, member: str) -> dict[int, int]:
    """Return the last committed offset `member` stored for each queue of TOPIC."""
    reader = KafkaConsumer(
        config.kafka.consumer_offsets_topic,
        bootstrap_servers=config.kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=3000,
    )
    found: dict[int, int] = {}
    try:
        for record in reader:
            group, topic, queue = json.loads(record.key)
            value: dict[str, Any] = json.loads(record.value)
            if group == GROUP and topic == TOPIC and value["member"] == member:
                found[queue] = value["offset"]
    finally:
        reader.close()
    return found


def test_a_member_killed_and_one_added_under_load(
    config: Config, engine: Engine, tmp_path: Path
) -> None:
    members = [Member(config, tmp_path / f"member-{i}.log") for i in range(3)]
    sent: list[str] = []
    loader = threading.Thread(
        target=lambda: sent.extend(load(config, time.monotonic() + LOAD_SECONDS))
    )
    loader.start()
    try:
        wait_for(lambda: len(members[1].handled()) >= 20, 120, "the second member at work")
        os.kill(members[1].process.pid, signal.SIGKILL)
        members[1].process.wait()
        killed = members[1]
        # Its queues go to the others once Kafka counts it out (the session timeout, 6 s).
        survivors = {members[0].name, members[2].name}
        wait_for(lambda: kafka_members(config, GROUP) == survivors, 120,
                 "the killed member out of its group")  # fmt: skip
        members.append(Member(config, tmp_path / "member-3.log"))
        loader.join(timeout=LOAD_SECONDS + 120)
        assert not loader.is_alive() and len(sent) == TRANSACTIONS

        def every_one_handled() -> bool:
            return {row[0] for m in members for row in m.handled()} >= set(sent)

        wait_for(every_one_handled, 180, "every committed message handled")
    finally:
        for member in members:
            member.stop()

    delivered = QueueReader(config.warehouse).ends([TOPIC])
    assert sum(delivered.values()) == TRANSACTIONS  # each transaction committed once

    # Duplicates: only the killed member's unstored acknowledgements.
    killed_stored = stored_offsets(config, killed.name)
    times: Counter[tuple[int, int]] = Counter()
    for member in members:
        for _, queue, offset, _ in member.handled():
            times[queue, offset] += 1
    killed_handled = {(q, o) for _, q, o, _ in killed.handled()}
    twice = {place for place, n in times.items() if n > 1}
    for queue, offset in twice:
        assert (queue, offset) in killed_handled, f"{queue}@{offset} twice, not after the kill"
        assert offset >= killed_stored.get(queue, 0), f"{queue}@{offset}: its ack was stored"
    # Order: each member read each queue in runs of consecutive offsets; a run ends where
    # the queue moved to another member, who handled the offsets skipped here.
    handled_by: dict[tuple[int, int], set[str]] = defaultdict(set)
    for member in members:
        for _, queue, offset, _ in member.handled():
            handled_by[queue, offset].add(member.name)
    for member in members:
        last: dict[int, int] = {}
        for _, queue, offset, _ in member.handled():
            previous = last.get(queue)
            if previous is not None and offset > previous + 1:
                skipped = range(previous + 1, offset)
                assert all(handled_by[queue, o] - {member.name} for o in skipped), (
                    f"{member.name} skipped from {queue}@{previous} to {offset}"
                )
            last[queue] = offset
    print(
        f"\n{TRANSACTIONS} committed; handled {sum(times.values())} times "
        f"({len(twice)} twice, all the killed member's unstored acks); "
        f"per member: {[len(m.handled()) for m in members]}"
    )
