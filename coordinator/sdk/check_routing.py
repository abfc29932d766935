"""Checks go first to the producer instance that sent the half (contract 5.3).

RocketMQ sends a check to any producer of the group; the one that sent the half usually
knows the answer best (its local transaction may still be in memory, apache/rocketmq#9347).
So every producer instance has an id, every half it sends carries it (property
txcoord.producer_instance), and the coordinator copies it onto the check record. Over Kafka:

- the **sender** reads every partition of its group's check topic, outside the consumer
  group, for the checks addressed to it (`addressed_to`), answers them at once and appends a
  claim to the check's partition (coordinator/protocol/check_claim.py);
- the **owner** of the partition in the group holds a check addressed to another instance for
  `delay` seconds (`HeldChecks`); a claim for it lets it go unanswered, otherwise it is
  answered like any other check once the delay is over (RocketMQ's behaviour: any live
  producer). A check addressed to the owner itself, or to nobody, is answered at once.

Held checks are not acknowledged, so their offsets stay uncommitted: an owner that dies
leaves them to the next owner, which holds them again from its own clock. Duplicate
answers (a claim that came late, a sender and an owner both answering) are harmless: the
coordinator records the second one as a duplicate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from coordinator.protocol.check_claim import CheckClaim
from coordinator.protocol.ingress import PRODUCER_GROUP, PRODUCER_INSTANCE
from coordinator.sdk.message import CheckRequest
from coordinator.sdk.offsets import Partition

Key = tuple[str, int]


class HeldChecks:
    """The owner's side: checks addressed to another instance, held until claimed or due.

    Used by the transport's single poller thread only (no lock).
    """

    def __init__(
        self,
        instance: str,
        delay: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.instance = instance
        self.delay = delay
        self._clock = clock
        # Insertion order is due order: every check is held for the same delay.
        self._held: dict[Key, list[tuple[float, CheckRequest]]] = {}

    def __len__(self) -> int:
        return sum(len(copies) for copies in self._held.values())

    def hold(self, request: CheckRequest) -> bool:
        """Hold `request` if another instance should answer it first; True if held."""
        addressee = request.producer_instance
        if self.delay <= 0 or addressee is None or addressee == self.instance:
            return False
        self._held.setdefault(request.key, []).append((self._clock() + self.delay, request))
        return True

    def claimed(self, claim: CheckClaim) -> list[CheckRequest]:
        """Return (and forget) the held copies of the check `claim` answered.

        Only the instance a check was addressed to may claim it: anyone else's claim leaves
        it held.
        """
        copies = self._held.get(claim.key, [])
        released = [r for _, r in copies if r.producer_instance == claim.producer_instance]
        kept = [(due, r) for due, r in copies if r.producer_instance != claim.producer_instance]
        if kept:
            self._held[claim.key] = kept
        else:
            self._held.pop(claim.key, None)
        return released

    def due(self, limit: int) -> list[CheckRequest]:
        """Return (and forget) at most `limit` held checks whose delay is over, oldest first."""
        now = self._clock()
        found: list[CheckRequest] = []
        for key in list(self._held):
            copies = self._held[key]
            if len(found) >= limit or copies[0][0] > now:
                # Keys are in the order their first copy came, so their first dues ascend.
                break
            ready: list[CheckRequest] = []
            left: list[tuple[float, CheckRequest]] = []
            for due, request in copies:
                if due <= now and len(found) + len(ready) < limit:
                    ready.append(request)
                else:
                    left.append((due, request))
            found += ready
            if left:
                self._held[key] = left
            else:
                del self._held[key]
        return found

    def retain(self, partitions: Iterable[Partition]) -> None:
        """Forget held checks of partitions no longer ours (their new owner reads them)."""
        keep = set(partitions)
        for key in list(self._held):
            copies = [(due, r) for due, r in self._held[key] if _partition(r) in keep]
            if copies:
                self._held[key] = copies
            else:
                del self._held[key]


def _partition(request: CheckRequest) -> Partition | None:
    if request.source is None:
        return None
    topic, partition, _ = request.source
    return (topic, partition)


def addressed_to(instance: str, group: str, headers: Iterable[tuple[str, bytes]] | None) -> bool:
    """Return True if a check-topic record with `headers` is a check of `group` for `instance`.

    The sender's reader looks only at headers: records of other groups and instances (the
    check topic may be shared by every group) are passed over without parsing.
    """
    found = dict(headers or ())
    return (
        found.get(PRODUCER_GROUP) == group.encode()
        and found.get(PRODUCER_INSTANCE) == instance.encode()
    )
