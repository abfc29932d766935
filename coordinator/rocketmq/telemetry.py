"""The live Telemetry streams, and the check-backs pushed to them.

A RocketMQ 5 producer opens one bidirectional Telemetry stream per endpoint: it sends its
Settings there, and the server pushes `RecoverOrphanedTransactionCommand`s, the check-backs,
which its TransactionChecker answers with an EndTransaction (source SOURCE_SERVER_CHECK).

For each live producer stream and each producer group it produces for, a poller thread takes
that group's check requests from the check topic through the REST ingress's CheckPoller
(coordinator/rest/check_poll.py: read committed, one Kafka consumer per group, in a Kafka
consumer group of this endpoint's own), naming the stream's producer instance: a check
whose half that client sent comes to its stream at once, to any stream of the group after
`grpc.check_sender_first` (RocketMQ's proxy, too, asks the sender's channel first and another
producer of the group when it is gone). A check taken by a stream that closes before it is
pushed is asked again at the next check (transaction_check_interval), as over REST.

A stream's producer groups: the one its credentials produce for; with an admin's or in open
mode (no producer group in the protocol), each topic its client names (Settings, QueryRoute,
SendMessage), as RocketMQ 5's proxy makes a transactional topic its own producer group.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, field

from rocketmq.grpc_protocol import service_pb2 as service

from coordinator.rest.auth import Principal
from coordinator.rest.instance_ids import bound_instance
from coordinator.rest.services import Poller
from coordinator.rocketmq.messages import check_command, instance_of

__all__ = ["LiveStream", "LiveStreams", "TooManyStreamsError"]

log = logging.getLogger("txcoord.rocketmq.telemetry")

#: Checks one poll takes at most for one stream.
_CHECKS_PER_POLL = 16
#: A poll's wait: bounds how late a poller notices that its stream closed.
_POLL_SECONDS = 1.0
#: Bytes of checks one poll takes at most (the first however large).
_POLL_BYTES = 8 * 1024 * 1024
#: Producer groups one stream serves at most (an admin's client naming topic after topic).
MAX_GROUPS_PER_STREAM = 16


class TooManyStreamsError(Exception):
    """Every stream slot is taken."""


@dataclass(eq=False)
class LiveStream:
    """One client's open Telemetry stream: what it is, and what waits to be pushed to it."""

    client_id: str
    principal: Principal
    #: The producer instance its halves name (bound to its token, instance_ids.py).
    instance: str
    producer: bool = False
    groups: set[str] = field(default_factory=set)
    outbox: queue.Queue[service.TelemetryCommand] = field(default_factory=queue.Queue)
    closed: threading.Event = field(default_factory=threading.Event)

    def push(self, command: service.TelemetryCommand) -> None:
        """Queue `command` for the client."""
        self.outbox.put(command)


class LiveStreams:
    """Every open Telemetry stream, and the threads that push their groups' checks."""

    def __init__(self, poller: Poller, max_streams: int = 64) -> None:
        self.poller = poller
        self.max_streams = max_streams
        self._lock = threading.Lock()
        self._streams: set[LiveStream] = set()
        #: Groups named by each client's calls before (or beside) its stream's Settings.
        self._named: dict[str, set[str]] = {}
        self._stop = threading.Event()

    def open(self, client_id: str, principal: Principal) -> LiveStream:
        """Return a new stream of `client_id`; raise TooManyStreamsError past max_streams."""
        stream = LiveStream(client_id, principal, bound_instance(principal, instance_of(client_id)))
        with self._lock:
            if len(self._streams) >= self.max_streams:
                raise TooManyStreamsError(f"{self.max_streams} Telemetry streams are open")
            self._streams.add(stream)
        return stream

    def close(self, stream: LiveStream) -> None:
        """Forget `stream`; its pollers end within a poll."""
        stream.closed.set()
        with self._lock:
            self._streams.discard(stream)

    def producer_settings(self, stream: LiveStream, topics: list[str]) -> None:
        """Record that `stream` is a producer's, of `topics`: start polling its groups."""
        stream.producer = True
        groups = {self.group_of(stream.principal, topic) for topic in topics}
        with self._lock:
            groups |= self._named.get(stream.client_id, set())
        # A group's checks carry its messages: only to a caller that may act for it.
        self._serve(stream, {g for g in groups if stream.principal.may_act_for(g)})

    def named(self, client_id: str, principal: Principal, topic: str) -> None:
        """Record that `client_id` produces on `topic` (a route asked, a half sent)."""
        group = self.group_of(principal, topic)
        if not principal.may_act_for(group):
            return  # a consumer's route: it gets no check of the group named like the topic
        with self._lock:
            known = self._named.setdefault(client_id, set())
            if len(known) < MAX_GROUPS_PER_STREAM:
                known.add(group)
            streams = [s for s in self._streams if s.client_id == client_id and s.producer]
        for stream in streams:
            self._serve(stream, {group})

    def terminated(self, client_id: str) -> None:
        """Close every stream of `client_id` (NotifyClientTermination)."""
        with self._lock:
            streams = [s for s in self._streams if s.client_id == client_id]
            self._named.pop(client_id, None)
        for stream in streams:
            self.close(stream)

    def close_all(self) -> None:
        """Close every stream and stop every poller."""
        self._stop.set()
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            self.close(stream)

    @staticmethod
    def group_of(principal: Principal, topic: str) -> str:
        """Return the producer group a caller produces `topic` as: its token's group, else
        (an admin, open mode) the topic itself, RocketMQ 5's proxy's rule."""
        if principal.group is not None and not principal.admin:
            return principal.group
        return topic

    def _serve(self, stream: LiveStream, groups: set[str]) -> None:
        with self._lock:
            new = sorted(groups - stream.groups)[: MAX_GROUPS_PER_STREAM - len(stream.groups)]
            stream.groups.update(new)
        for group in new:
            threading.Thread(
                target=self._push_checks,
                args=(stream, group),
                name=f"rocketmq-checks-{group}",
                daemon=True,
            ).start()

    def _push_checks(self, stream: LiveStream, group: str) -> None:
        """Push `group`'s checks to `stream` until it closes."""
        while not (stream.closed.is_set() or self._stop.is_set()):
            try:
                checks = self.poller.poll(
                    group, _CHECKS_PER_POLL, _POLL_SECONDS, stream.instance, max_bytes=_POLL_BYTES
                )
            except Exception as exc:  # Kafka away: try again, the stream stays open
                log.warning("check requests of %s cannot be read now: %s", group, exc)
                stream.closed.wait(_POLL_SECONDS)
                continue
            for check in checks:
                stream.push(check_command(check))
