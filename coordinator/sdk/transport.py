"""The port between a producer and the coordinator; Kafka, REST and memory are adapters.

A transport belongs to one producer group. It is used from several threads at once:
`send_half` from the application's threads, `send_op` and `acknowledge` from the check
workers, `poll_checks` from the single poller thread; `close` after all of them stopped.
A transport may also store many ops in one call, `send_ops` (the Kafka and REST ones do,
`SendsOps` below): the check workers (coordinator/sdk/check_answerer.py) then send their
answers together, one worker at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from coordinator.sdk.errors import SdkError
from coordinator.sdk.message import CheckRequest, Message

#: contract 4's max_message_size default (RocketMQ's 4 MiB); larger bodies are refused.
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024


@dataclass(frozen=True)
class HalfReceipt:
    """A half message durably stored by the ingress (Kafka acks=all)."""

    transaction_id: str
    msg_id: str
    stored_at: datetime
    partition: int | None = None
    offset: int | None = None


@dataclass(frozen=True)
class OpReceipt:
    """An op record durably stored by the ingress."""

    transaction_id: str
    op: str
    op_id: str
    stored_at: datetime


class Transport(Protocol):
    """How a producer reaches the coordinator; see the module docstring for threading."""

    def send_half(self, message: Message, transaction_id: str) -> HalfReceipt:
        """Store the half message of `transaction_id`; return once it is durable."""
        ...

    def send_op(self, transaction_id: str, op: str, from_check: bool) -> OpReceipt:
        """Store op COMMIT, ROLLBACK or UNKNOWN for `transaction_id`; return once durable."""
        ...

    def poll_checks(self, max_records: int, wait_seconds: float) -> list[CheckRequest]:
        """Return at most `max_records` of the group's check requests, waiting if none.

        `max_records=0` takes nothing but keeps the transport's session alive (a Kafka
        consumer stays in its group while the producer applies backpressure).
        """
        ...

    def acknowledge(self, request: CheckRequest) -> None:
        """Mark `request` handled, so it is not delivered again (Kafka: offset committable)."""
        ...

    def close(self) -> None:
        """Release connections; commit what was acknowledged."""
        ...


@runtime_checkable
class SendsOps(Protocol):
    """A transport that stores many ops in one call (the Kafka and REST transports)."""

    def send_ops(self, ops: Sequence[tuple[str, str, bool]]) -> list[OpReceipt | SdkError]:
        """Store each (transaction id, op, from_check); one receipt or error per op, in order."""
        ...
