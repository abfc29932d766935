"""Whose share a request counts against, and a cap on each one's requests in flight.

The ingress's capacity (threads, long-poll slots, consumer members) is shared by every
caller, so each is handed out by shares (contract 5.1): one token's share, whatever groups
it names, so that a token granted several groups does not get a share for each (before,
a token held 8 check polls of its producer group plus 8 receives of each consumer group it
may consume as: twice the documented share, or more; issue 61, finding 8).

    holder_of   the token a request counts against, or None for an admin token and open
                mode: they act for every group, so each group they name is bounded by that
                group's share alone (an admin token is trusted; open mode listens on
                loopback only)
    InFlight    at most `per_holder` requests of one holder at once; one more is refused
                at once (InFlightFullError, answered 429 too_many_requests with
                Retry-After), never queued: a token that floods waits for its own answers,
                not the others for theirs

The reads (lookups, acks, changes of invisible duration) are capped by an InFlight of
`rest.max_reads_per_token`, the sends by one of `rest.max_sends_per_token` (pools.py); the
long polls by PollSlots (poll_slots.py); the consumer members by ConsumerMembers
(consumers.py). Pure bookkeeping, thread-safe.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable, Hashable

from coordinator.rest.auth import Principal

__all__ = ["InFlight", "InFlightFullError", "Ticket", "holder_of", "read_key"]


def holder_of(who: Principal) -> Principal | None:
    """Return the token whose share `who`'s requests count against (None: admin, open mode)."""
    return None if who.admin else who


def read_key(who: Principal, kind: str, group: str | None) -> tuple[Hashable, str]:
    """Return the key of a read by `who` naming `kind` `group` (a producer or consumer
    group), and how a refusal names it: the token's own; for an admin, the group's."""
    holder = holder_of(who)
    if holder is not None:
        return holder, f"token {holder.name!r}"
    return (kind, group or ""), f"{kind} {group or ''!r}"


class InFlightFullError(Exception):
    """The holder has as many requests in flight as it may."""


class Ticket:
    """One request in flight, or one slot taken: release() gives it back, once (a second
    release, say from a `finally` after an early one, is harmless)."""

    def __init__(self, give_back: Callable[[], None]) -> None:
        self._give_back = give_back
        self._released = False

    def release(self) -> None:
        """Count the request out."""
        if not self._released:
            self._released = True
            self._give_back()


class InFlight:
    """Count requests in flight per holder, at most `per_holder` each; thread-safe."""

    def __init__(self, per_holder: int, what: str = "requests") -> None:
        if per_holder < 1:
            raise ValueError(f"per_holder must be at least 1, not {per_holder}")
        self.per_holder = per_holder
        self.what = what
        self._held: Counter[Hashable] = Counter()
        self._lock = threading.Lock()

    def take(self, key: Hashable, label: str) -> Ticket:
        """Count one request of `key` in, or raise InFlightFullError at once (`label`
        names the holder in the message)."""
        with self._lock:
            if self._held[key] >= self.per_holder:
                raise InFlightFullError(
                    f"{label} already has {self.per_holder} {self.what} in flight (its share "
                    "of this ingress); retry when one has answered"
                )
            self._held[key] += 1
        return Ticket(functools.partial(self._give_back, key))

    def held(self, key: Hashable) -> int:
        """Return how many requests of `key` are in flight now."""
        with self._lock:
            return self._held[key]

    def _give_back(self, key: Hashable) -> None:
        with self._lock:
            self._held[key] -= 1
            if self._held[key] <= 0:
                del self._held[key]
