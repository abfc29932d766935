"""Long-poll slots shared fairly between groups and tokens (contract 5.1).

Each waiting long poll holds a thread for up to rest.check_poll_max_wait. Without a bound per
group, one group's pollers could take every slot and others would queue behind them. So:

    total       slots for every group together (each is a thread while it waits)
    per_group   slots one group may hold at once: total // GROUPS_AT_FULL_SHARE, so at
                least that many groups can poll at full share whatever one group does
    per token   the same share for each token (in_flight.holder_of), its check polls and
                its receives as every consumer group it may consume as together: before, a
                token held a share per group it named (8 check polls plus 8 receives of
                each consumer group; issue 61, finding 8). An admin token and open mode
                are bounded per group only.

A poll that would pass its group's or its token's share, or find every slot taken, is
refused at once (429, Retry-After) instead of queued: queueing is bounded by construction (it
is zero), and a client's retry is the queue. More pollers of one group than its share would
gain nothing anyway: a group's pollers take turns on its one consumer (check_poll.py).
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from typing import TYPE_CHECKING

from coordinator.rest.in_flight import Ticket

if TYPE_CHECKING:
    from coordinator.rest.auth import Principal

#: Slots of one REST process (threads of the long-poll pool).
DEFAULT_TOTAL = 64
#: The share is sized so that at least this many groups can poll at full share at once.
GROUPS_AT_FULL_SHARE = 8


class PollSlotsFullError(Exception):
    """No slot for this poll: its group holds its share, or every slot is taken."""


class PollSlots:
    """Count long polls per group, per token and in all; thread-safe."""

    def __init__(self, total: int = DEFAULT_TOTAL, per_group: int | None = None) -> None:
        share = per_group if per_group is not None else max(1, total // GROUPS_AT_FULL_SHARE)
        if total < 1 or not 1 <= share <= total:
            raise ValueError(f"need total >= 1 and 1 <= per_group <= total, not {total}, {share}")
        self.total = total
        self.per_group = share
        self._held: Counter[str] = Counter()
        self._by_holder: Counter[Principal] = Counter()
        self._lock = threading.Lock()

    def take(self, group: str, holder: Principal | None = None, label: str | None = None) -> Ticket:
        """Take a slot for a poll of `group` by `holder` (None: bounded per group only), or
        raise PollSlotsFullError at once; `label` names the group in its message."""
        with self._lock:
            if holder is not None and self._by_holder[holder] >= self.per_group:
                raise PollSlotsFullError(
                    f"token {holder.name!r} already has {self.per_group} long polls waiting "
                    "(check polls and receives together: its share of this ingress); retry "
                    "when one has answered"
                )
            if self._held[group] >= self.per_group:
                raise PollSlotsFullError(
                    f"{label or f'producer group {group!r}'} already has {self.per_group} long "
                    "polls waiting (its share of this ingress); retry when one has answered"
                )
            if sum(self._held.values()) >= self.total:
                raise PollSlotsFullError(
                    f"all {self.total} long-poll slots are taken by other groups; retry shortly"
                )
            self._held[group] += 1
            if holder is not None:
                self._by_holder[holder] += 1
        return Ticket(functools.partial(self._give_back, group, holder))

    def held(self, group: str) -> int:
        """Return how many slots `group` holds now."""
        with self._lock:
            return self._held[group]

    def total_held(self) -> int:
        """Return how many slots are held now, by every group."""
        with self._lock:
            return sum(self._held.values())

    def held_by(self, holder: Principal) -> int:
        """Return how many slots `holder` holds now, for every group together."""
        with self._lock:
            return self._by_holder[holder]

    def _give_back(self, group: str, holder: Principal | None) -> None:
        with self._lock:
            self._held[group] -= 1
            if self._held[group] <= 0:
                del self._held[group]
            if holder is not None:
                self._by_holder[holder] -= 1
                if self._by_holder[holder] <= 0:
                    del self._by_holder[holder]
