"""What a consumer receives: a delivered message, where it is, and how to acknowledge it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["MessageView", "Receipt"]


@dataclass(frozen=True)
class Receipt:
    """What `ack` needs: the message's place, the consumer's lease on its queue, and which
    delivery of the message it came with."""

    topic: str
    queue_id: int
    queue_offset: int
    #: The queue's lease when the message was handed out: an ack from before the queue
    #: moved to another member (or came back) no longer counts.
    lease: int
    #: The delivery attempt it came with: once the message is handed out again, this
    #: receipt no longer counts (RocketMQ makes a new receipt handle at every delivery).
    attempt: int


@dataclass(frozen=True)
class MessageView:
    """A committed message as delivered to its topic and queue (RocketMQ's MessageView)."""

    topic: str
    queue_id: int
    queue_offset: int
    msg_id: str
    transaction_id: str
    producer_group: str
    body: bytes
    keys: tuple[str, ...]
    tag: str | None
    properties: Mapping[str, str]
    prepared_at: datetime | None
    committed_at: datetime
    delivered_at: datetime
    #: 1 the first time this consumer hands it out, then 2, 3... (redelivered after its
    #: invisible duration, not acknowledged).
    delivery_attempt: int
    receipt: Receipt = field(repr=False)

    @classmethod
    def of_row(cls, row: Mapping[str, Any], attempt: int, lease: int) -> MessageView:
        """Return the view of one row of a topic table."""
        return cls(
            topic=row["topic"],
            queue_id=int(row["queue_id"]),
            queue_offset=int(row["queue_offset"]),
            msg_id=row["msg_id"],
            transaction_id=row["transaction_id"],
            producer_group=row["producer_group"],
            body=bytes(row["body"] or b""),
            keys=tuple(row["keys"] or ()),
            tag=row["tags"],
            properties=dict(row["properties"] or ()),
            prepared_at=row["prepared_at"],
            committed_at=row["committed_at"],
            delivered_at=row["delivered_at"],
            delivery_attempt=attempt,
            receipt=Receipt(
                row["topic"], int(row["queue_id"]), int(row["queue_offset"]), lease, attempt
            ),
        )
