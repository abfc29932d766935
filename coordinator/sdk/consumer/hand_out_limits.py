"""How much a consumer hands out: per receive (count and bytes), and held unacknowledged.

Two bounds, both in bytes as well as in count, since a message may be megabytes:

    AnswerBudget    one receive's messages: at most `max_messages`, and at most `max_bytes`
                    as the caller measures them (`size_of`: by default the message's
                    bytes; the REST ingress measures its JSON). The first message always
                    fits, however large: a budget smaller than one message must not keep it
                    from ever being handed out.
    HeldMessages    the rows of the messages handed out and not acknowledged yet, kept for
                    their redelivery: at most `max_messages` rows and `max_bytes` bytes
                    (None: no bound). A new message is handed out only if it fits (an empty
                    consumer takes one of any size); a redelivery always may, it is held
                    already. A consumer that never acknowledges thus holds a bounded part of
                    its queues, not their whole backlog (RocketMQ's push consumer stops
                    pulling a queue past pullThresholdForQueue / pullThresholdSizeForQueue).

Pure bookkeeping: the consumer holds its lock around every call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from coordinator.sdk.consumer.message_view import MessageView

__all__ = ["AnswerBudget", "HeldMessages", "message_size", "row_size"]

#: A held message: (topic, queue id, queue offset).
Key = tuple[str, int, int]


def row_size(row: Mapping[str, Any]) -> int:
    """Return the bytes of a topic row's message: body, keys, tags, properties."""
    keys = row.get("keys") or ()
    properties = dict(row.get("properties") or ())
    return (
        len(row.get("body") or b"")
        + sum(len(key.encode()) for key in keys)
        + len((row.get("tags") or "").encode())
        + sum(len(name.encode()) + len(value.encode()) for name, value in properties.items())
    )


def message_size(message: MessageView) -> int:
    """Return the bytes of `message`: body, keys, tags, properties."""
    return (
        len(message.body)
        + sum(len(key.encode()) for key in message.keys)
        + len((message.tag or "").encode())
        + sum(len(k.encode()) + len(v.encode()) for k, v in message.properties.items())
    )


class AnswerBudget:
    """The messages of one receive, within `max_messages` and `max_bytes` (None: any)."""

    def __init__(
        self,
        max_messages: int,
        max_bytes: int | None = None,
        size_of: Callable[[MessageView], int] | None = None,
    ) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._size_of = size_of or message_size
        self.messages: list[MessageView] = []
        self.spent_bytes = 0

    def room(self) -> int:
        """Return how many more messages the count allows."""
        return max(0, self.max_messages - len(self.messages))

    def spent(self) -> bool:
        """Return whether no further message fits the count."""
        return self.room() == 0

    def add(self, message: MessageView) -> bool:
        """Add `message` if it fits (the first always does); return whether it was added."""
        if self.spent():
            return False
        size = self._size_of(message) if self.max_bytes is not None else 0
        if (
            self.messages
            and self.max_bytes is not None
            and self.spent_bytes + size > self.max_bytes
        ):
            return False
        self.messages.append(message)
        self.spent_bytes += size
        return True


class HeldMessages:
    """The rows of the messages in flight, within `max_messages` and `max_bytes` (None: any)."""

    def __init__(self, max_messages: int | None = None, max_bytes: int | None = None) -> None:
        if max_messages is not None and max_messages < 1:
            raise ValueError(f"max_unacked_messages must be at least 1, not {max_messages}")
        if max_bytes is not None and max_bytes < 1:
            raise ValueError(f"max_unacked_bytes must be at least 1, not {max_bytes}")
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._rows: dict[Key, tuple[dict[str, Any], int]] = {}
        self.bytes = 0
        #: A new message was left behind for want of room since the last `begin`.
        self.refused = False

    @property
    def count(self) -> int:
        """Return the messages held."""
        return len(self._rows)

    def begin(self) -> None:
        """Start a hand-out: forget that an earlier one was refused room."""
        self.refused = False

    def full(self) -> bool:
        """Return whether no new message fits now (the last hand-out left one behind for
        want of room, or a bound is reached)."""
        if not self._rows:
            return False
        return (
            self.refused
            or (self.max_messages is not None and self.count >= self.max_messages)
            or (self.max_bytes is not None and self.bytes >= self.max_bytes)
        )

    def has_room(self, size: int) -> bool:
        """Return whether a new message of `size` bytes fits (in an empty holder, any does);
        remember a refusal (`refused`)."""
        fits = not self._rows or (
            (self.max_messages is None or self.count < self.max_messages)
            and (self.max_bytes is None or self.bytes + size <= self.max_bytes)
        )
        self.refused |= not fits
        return fits

    def row(self, key: Key) -> dict[str, Any] | None:
        """Return the row held for `key`, or None."""
        held = self._rows.get(key)
        return None if held is None else held[0]

    def keep(self, key: Key, row: dict[str, Any]) -> None:
        """Hold `row` for `key` (in place of any row held for it)."""
        self.forget(key)
        size = row_size(row)
        self._rows[key] = (row, size)
        self.bytes += size

    def forget(self, key: Key) -> None:
        """Stop holding `key`'s row, if held."""
        held = self._rows.pop(key, None)
        if held is not None:
            self.bytes -= held[1]
