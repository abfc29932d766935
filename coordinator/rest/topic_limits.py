"""New topics refused before Kafka, past `max_topics` or `max_topics_per_group` (finding 7).

With `auto_create_topic_enable` a half may name a topic nobody created, and each such topic
is a table that every start of the coordinator fences, a metric label and a tally entry, for
good. The coordinator lets in at most `max_topics` topics in the warehouse and
`max_topics_per_group` brought in by one producer group, and quarantines a half past either
(streams/ingest/topic_admission.py). The ingress refuses such a send before it reaches Kafka, with
`403 topic_limit`, and writes nothing: the client learns at once what the coordinator would
decide later, as with every rule of the ingest.

What the warehouse knows is read from `system/known_topics` and the topic tables
(delta_tables/known_topics.py), again when a send names a topic not among them (at most once
per REFRESH_SECONDS: a caller naming new topics without end costs one read a second). The
topics this ingress let in since are counted too until the coordinator has recorded them
(their halves land within a batch or two), or for LOCAL_SECONDS. The coordinator decides;
this is its forecast: several ingresses, or producers writing Kafka directly, may let in the
last few topics of the room side by side, and then the coordinator quarantines the halves
that come past it, although the ingress answered 201. While the warehouse cannot be read,
only the topics let in here count (the coordinator still applies the limits), and the log
says so.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

from deltalake.exceptions import DeltaError

from coordinator.core.config import Config
from coordinator.rest.errors import ApiError
from delta_tables.known_topics import known_topics

__all__ = ["LOCAL_SECONDS", "REFRESH_SECONDS", "TopicLimits"]

log = logging.getLogger("txcoord.rest.topics")

#: The shortest time between two reads of what the warehouse knows.
REFRESH_SECONDS = 1.0
#: How long a topic this ingress let in counts while the warehouse does not know it yet.
LOCAL_SECONDS = 300.0

#: (field prefix of the error message, producer group, topic) of one half to send.
Half = tuple[str, str, str]


class TopicLimits:
    """Refuse halves that would bring in a topic past the limits; thread-safe."""

    def __init__(
        self,
        config: Config,
        read: Callable[[str], dict[str, str | None]] = known_topics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.enabled = config.auto_create_topic_enable
        self.max_topics = config.max_topics
        self.max_per_group = config.max_topics_per_group
        self._warehouse = config.warehouse
        self._read = read
        self._clock = clock
        self._lock = threading.Lock()
        self._reading = threading.Lock()  # one read of the warehouse at a time
        self._known: dict[str, str | None] = {}
        self._read_at: float | None = None
        self._failing: str | None = None
        # Topics let in here that the warehouse does not know yet: topic -> (group, when).
        self._local: dict[str, tuple[str, float]] = {}

    def admit(self, halves: Sequence[Half]) -> None:
        """Let `halves` in, or raise `403 topic_limit` naming the first that would bring in
        a topic past a limit (then none is let in); their new topics count from now on."""
        if not self.enabled or all(self._is_known(topic) for _, _, topic in halves):
            return
        self._refresh()
        with self._lock:
            now = self._clock()
            self._local = {
                topic: (group, since)
                for topic, (group, since) in self._local.items()
                if topic not in self._known and now - since < LOCAL_SECONDS
            }
            total = len(self._known) + len(self._local)
            per_group = Counter(group for group in self._known.values() if group)
            per_group.update(group for group, _ in self._local.values())
            new: dict[str, str] = {}
            for field, group, topic in halves:
                if topic in self._known or topic in self._local or topic in new:
                    continue
                if total >= self.max_topics:
                    raise ApiError(
                        403,
                        "topic_limit",
                        f"{field}topic: {topic!r} would be a new topic, and the warehouse "
                        f"holds max_topics ({self.max_topics}) topics already "
                        "(auto_create_topic_enable): send to a topic that exists, or raise "
                        "max_topics",
                    )
                if per_group[group] >= self.max_per_group:
                    raise ApiError(
                        403,
                        "topic_limit",
                        f"{field}topic: {topic!r} would be a new topic, and producer group "
                        f"{group!r} has brought in max_topics_per_group ({self.max_per_group}) "
                        "topics already (auto_create_topic_enable): send to a topic that "
                        "exists, or raise max_topics_per_group",
                    )
                new[topic] = group
                total += 1
                per_group[group] += 1
            self._local.update({topic: (group, now) for topic, group in new.items()})

    def _is_known(self, topic: str) -> bool:
        with self._lock:
            return topic in self._known or topic in self._local

    def _refresh(self) -> None:
        """Read what the warehouse knows, unless it was read less than REFRESH_SECONDS ago."""
        with self._reading:
            if self._read_at is not None and self._clock() - self._read_at < REFRESH_SECONDS:
                return
            try:
                known = self._read(self._warehouse)
            except (OSError, DeltaError) as exc:
                reason = f"{type(exc).__name__}: {exc}"
                if reason != self._failing:
                    log.warning(
                        "the warehouse's topics cannot be read (%s): new topics are let "
                        "through to the coordinator, which applies max_topics itself",
                        reason,
                    )
                self._failing = reason
                self._read_at = self._clock()
                return
            self._failing = None
            with self._lock:
                self._known = known
                self._read_at = self._clock()
