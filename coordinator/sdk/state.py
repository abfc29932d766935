"""The answer of a local transaction: RocketMQ's LocalTransactionState."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from coordinator.core.state_machine import Event


class LocalTransactionState(Enum):
    """COMMIT_MESSAGE, ROLLBACK_MESSAGE or UNKNOWN (alias UNKNOW, RocketMQ's own spelling)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOWN = "UNKNOWN"
    if TYPE_CHECKING:
        # Type checkers treat an enum alias as a member of its own; declared like this they
        # see what it is at run time: the UNKNOWN member itself.
        UNKNOW: LocalTransactionState
    else:
        # Same value, so Enum makes it an alias: LocalTransactionState.UNKNOW is UNKNOWN.
        UNKNOW = "UNKNOWN"

    @property
    def op(self) -> str:
        """Return the op record this state sends: COMMIT, ROLLBACK or UNKNOWN."""
        return _OPS[self]


_OPS = {
    LocalTransactionState.COMMIT_MESSAGE: Event.COMMIT.value,
    LocalTransactionState.ROLLBACK_MESSAGE: Event.ROLLBACK.value,
    LocalTransactionState.UNKNOWN: Event.UNKNOWN.value,
}
