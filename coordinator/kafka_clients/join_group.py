"""kafka-python completes a group join that outlives the poll that began it.

kafka-python 3.0 runs a member's JoinGroup and SyncGroup as one task on the client's I/O
thread. A poll whose timeout runs out first leaves the task in flight, and the next poll
awaits it again: unless it has ended in between. Then `join_group_async` takes the ended
task for a stale one and sends a new JoinGroup, dropping the assignment the task carried. A
leader's JoinGroup begins a new generation, so whenever a join took longer than one poll
(a loaded host, a member polled in short slices) the group rebalanced again, and on a loaded
CI host for good: two SDK consumers never stood in one generation in 90 s, and a REST member's
share was never handed out ('16 of 32 in 180 s', 135 generations in 180 s).

`install` hands such an ended task to the poll as a pending one that ends, with the same
outcome, on the I/O loop's next turn: the poll then completes the join as if it had waited
(state, heartbeat, the assignment and the rebalance listener), and a failed one is handled
as kafka-python handles a join that fails while awaited.

Nor does a poll forget a join in flight. kafka-python 3.0 asks `need_rejoin()` before it
awaits the join, and a rejoin that a metadata change began (a subscribed topic got its first
partitions, or more) stops being needed by that test as soon as the leader has made its
assignment, inside the join, before the SyncGroup answer comes. A poll that gave up before the
answer left the join in flight; every later poll found no rejoin needed and never collected
it; the member's heartbeat, stopped for the join, never resumed; the broker dropped the
member 6 s later and the client never learned of it. A lone consumer whose first generation
had no partition of the deliveries topic (its metadata came just after the first join) stood
so, assigned nothing, until it was closed (the bench's consumer: 'consumed 0 of 200' in a gate
run, 1 fresh member in 100 beside two CPU hogs). Java's client asks "rejoin needed *or
pending*"; `install` makes kafka-python's `need_rejoin` say so too, while a join task is
set (begun and not collected). Installed before any kafka-python client of the product is
built (coordinator/kafka_clients/options.py).
"""

from __future__ import annotations

from typing import Any

from kafka.coordinator.base import BaseCoordinator
from kafka.future import Future

__all__ = ["install"]

_MARK = "_txcoord_collects_an_ended_join"


def install() -> None:
    """Wrap kafka-python's group join and its `need_rejoin` (once, however often called)."""
    original = BaseCoordinator.join_group_async
    if getattr(original, _MARK, False):
        return
    needed = BaseCoordinator.need_rejoin

    def need_rejoin(self: BaseCoordinator) -> bool:
        # A join task is set from the JoinGroup's sending until a poll collects its outcome
        # (kafka-python clears it then, ended well or not): until then the join is pending.
        return bool(needed(self)) or self._join_task is not None

    async def join_group_async(self: BaseCoordinator, timeout_ms: Any = None) -> Any:
        task = self._join_task
        if task is not None and task.is_done:  # ended after the last poll gave up on it
            self._join_task = _replayed(self._manager, task)
        return await original(self, timeout_ms=timeout_ms)

    setattr(join_group_async, _MARK, True)
    BaseCoordinator.need_rejoin = need_rejoin
    BaseCoordinator.join_group_async = join_group_async


def _replayed(manager: Any, ended: Future) -> Future:
    """Return a future that takes `ended`'s outcome on the I/O loop's next turn: pending
    when kafka-python looks at it, so it is awaited rather than replaced."""
    pending = Future()

    def settle() -> None:
        if ended.failed():
            pending.failure(ended.exception)
        else:
            pending.success(ended.value)

    manager.call_soon(settle)
    return pending
