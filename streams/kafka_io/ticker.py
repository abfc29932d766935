"""Heartbeats into the ingress topics, so event time moves when no producer writes.

The coordinator's timers fire only when the watermark passes them, and the watermark moves
only with new rows (spark-notes: "a quiet system never checks anything unless event time is
made to move"). The ticker appends a heartbeat record to every partition of both ingress
topics each `tick_interval`. Because a heartbeat travels the same path as data — same
partitions, stamped by the broker's LogAppendTime, read by the same micro-batch as the data
stored before it — it can only move event time up to what has really been stored: after a
long stop, heartbeats sit in the backlog in order with the data and never run ahead of it
(contract 7.4 and 7.5).

With a `TickPace` (streams/kafka_io/tick_pace.py) the ticker sends every `tick_interval` only while
a timer may be near, and every `idle_interval` of the pace otherwise: an idle stack does not
run a micro-batch a second for nothing. It still looks at the pace every `tick_interval`, so
it is busy again within one tick of a batch that needs it.

*When* in the tick it sends matters. Spark starts a micro-batch at every whole multiple of
the trigger interval since the epoch, and the batch reads what was stored before it started;
a timer due at store time D fires one batch after the batch that read a store time past
D + skew. A heartbeat stored just after a batch started waits a whole trigger interval to be
read, and every check waits with it (how much: docs/performance.md, decisions). So the
ticker sends `LEAD` before each whole multiple of `tick_interval`
(the trigger interval, or a multiple of it, in every configuration we ship): each batch reads
a heartbeat that is at most `LEAD` old.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Sequence
from datetime import timedelta

from kafka import KafkaProducer
from kafka.errors import KafkaError

from coordinator.core.kafka_security import KafkaSecurity
from coordinator.kafka_clients.options import kafka_python_options
from coordinator.protocol import ingress as fmt
from streams.kafka_io.tick_pace import TickPace

log = logging.getLogger(__name__)

#: How long before a tick boundary (a batch's start) a heartbeat is sent: enough for a local
#: or nearby broker to acknowledge it (milliseconds) with room for a busy interpreter's
#: scheduling, small against the store-time skew the watermark trails by (0.75 s by default).
LEAD = 0.15


def until_next_tick(now: float, interval: float, lead: float = LEAD) -> float:
    """Return seconds from `now` (epoch seconds) until `lead` before the next multiple of
    `interval` since the epoch (`lead` is capped at a quarter of the interval)."""
    lead = min(lead, interval / 4)
    boundary = (math.floor((now + lead) / interval) + 1) * interval
    return boundary - lead - now


class Ticker:
    """A daemon thread that sends heartbeats until stopped."""

    def __init__(
        self,
        bootstrap_servers: str,
        topics: Sequence[str],
        interval: timedelta,
        security: KafkaSecurity | None = None,
        pace: TickPace | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.security = security or KafkaSecurity()
        self.topics = tuple(topics)
        self.interval = interval.total_seconds()
        self.pace = pace
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="txcoord-ticker", daemon=True)
        self.sent = 0

    def start(self) -> Ticker:
        """Start sending heartbeats in the background."""
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop sending and wait for the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def tick_once(self, producer: KafkaProducer) -> int:
        """Send one heartbeat to every partition of every topic; return how many were sent.

        Raise if a topic's partitions are unknown or a heartbeat is not acknowledged: a
        ticker that quietly sends nothing would freeze event time (contract 7.4).
        """
        futures = []
        for topic in self.topics:
            partitions = producer.partitions_for(topic)
            if not partitions:
                raise KafkaError(f"no partitions known for topic {topic!r}")
            for partition in sorted(partitions):
                futures.append(
                    producer.send(
                        topic,
                        value=b"",
                        partition=partition,
                        headers=[(fmt.KIND, fmt.KIND_TICK.encode())],
                    )
                )
        producer.flush(timeout=max(self.interval * 5, 10))
        for future in futures:
            future.get(timeout=0)
        return len(futures)

    def beat(self) -> int:
        """Send one heartbeat to every partition now, from a producer of its own; return how
        many were sent (a query started on its own, with no ticker, gets a batch at once)."""
        producer = self._connect()
        try:
            return self.tick_once(producer)
        finally:
            producer.close(timeout=5)

    def _due(self, last_sent: float | None) -> bool:
        """Return True if a heartbeat is due now, `last_sent` being the last one's time."""
        pace = self.pace
        if pace is None or last_sent is None or pace.busy():
            return True
        return time.monotonic() - last_sent >= pace.idle_interval

    def _connect(self) -> KafkaProducer:
        """Return a producer that already knows every topic's partitions."""
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap_servers,
            acks="all",
            linger_ms=0,
            max_block_ms=int(max(self.interval * 5, 10) * 1000),
            **kafka_python_options(self.security),
        )
        try:
            for topic in self.topics:
                producer.partitions_for(topic)
        except Exception:
            producer.close(timeout=1)
            raise
        return producer

    def _run(self) -> None:
        producer: KafkaProducer | None = None
        failing_since: float | None = None
        last_sent: float | None = None
        # Connect before the first tick, not at it: the connection and the topics' metadata
        # took the first heartbeat past its moment on a busy machine (stored after the
        # boundary it should precede).
        try:
            producer = self._connect()
        except Exception as exc:
            log.warning(
                "heartbeat producer not connected yet (%s); trying again at the first tick", exc
            )
        while not self._stop.wait(until_next_tick(time.time(), self.interval)):
            if not self._due(last_sent):
                continue
            try:
                if producer is None:
                    producer = self._connect()
                self.sent += self.tick_once(producer)
                last_sent = time.monotonic()
                if failing_since is not None:
                    log.info("heartbeats resumed after %.0f s", time.monotonic() - failing_since)
                    failing_since = None
            except Exception as exc:  # keep ticking through broker restarts
                if failing_since is None:
                    failing_since = time.monotonic()
                log.warning("heartbeat failed (%s); retrying with a new producer", exc)
                # A fresh client bootstraps again: an old one may keep metadata of a broker
                # that restarted and never recover it.
                if producer is not None:
                    with contextlib.suppress(Exception):
                        producer.close(timeout=1)
                    producer = None
        if producer is not None:
            with contextlib.suppress(Exception):
                producer.close(timeout=5)
