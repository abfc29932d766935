"""Which queues a member of a consumer group reads: queues dealt round the members by id.

Every member computes its own share from the same facts, the generation's sorted member
names (Kafka's group protocol: coordinator/sdk/consumer/membership.py) and the queue ids,
so no member hands queues out to others (RocketMQ's client-side rebalance). Queue `q` of
topic `t` goes to member `(q + crc32(t)) mod n`: a queue that appears later takes its place
without moving any other (an allocation by rank, such as RocketMQ's "averagely", would
shift queues between members when a queue is added, with no rebalance to hand them over),
and the topics of a group start at different members so that small topics spread out.
Queue ids are dense from 0 in practice (`default_queue_count`), which keeps the shares even.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

__all__ = ["allocate", "owner"]


def owner(topic: str, queue_id: int, members: Sequence[str]) -> str | None:
    """Return the member of `members` that reads (`topic`, `queue_id`); None if none."""
    ordered = sorted(set(members))
    if not ordered:
        return None
    return ordered[(queue_id + zlib.crc32(topic.encode())) % len(ordered)]


def allocate(
    queues: Iterable[tuple[str, int]], members: Sequence[str], me: str
) -> set[tuple[str, int]]:
    """Return the queues of `queues` that member `me` of `members` reads."""
    return {(topic, queue) for topic, queue in queues if owner(topic, queue, members) == me}
