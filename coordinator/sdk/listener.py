"""The application's side of the protocol: RocketMQ's TransactionListener."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from coordinator.sdk.message import CheckRequest, Message
from coordinator.sdk.state import LocalTransactionState

log = logging.getLogger(__name__)


class TransactionListener(ABC):
    """Run the local transaction, and answer the coordinator's checks about it.

    Return UNKNOWN (or UNKNOW) while the local transaction is still running; an exception
    or None counts as UNKNOWN, as in RocketMQ. Store the transaction id with the business
    row, so `check_local_transaction` can answer from durable state.
    """

    @abstractmethod
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState | None:
        """Run the local transaction of `msg` (its half is already stored); return its state."""

    @abstractmethod
    def check_local_transaction(self, msg: CheckRequest) -> LocalTransactionState | None:
        """Return the state of the local transaction `msg.transaction_id`."""


def decide(call: Callable[[], object], what: str, transaction_id: str) -> LocalTransactionState:
    """Run one listener callback; return its state, UNKNOWN on an exception, None or junk."""
    try:
        state = call()
    except Exception:
        log.exception("%s of transaction %s raised; counted as UNKNOWN", what, transaction_id)
        return LocalTransactionState.UNKNOWN
    if state is None:
        return LocalTransactionState.UNKNOWN
    if not isinstance(state, LocalTransactionState):
        log.error(
            "%s of transaction %s returned %r, not a LocalTransactionState; counted as UNKNOWN",
            what,
            transaction_id,
            state,
        )
        return LocalTransactionState.UNKNOWN
    return state
