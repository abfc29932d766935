"""What a producer sends (`Message`), gets back (`SendResult`) and is asked (`CheckRequest`).

`Message` is checked when built, with messages that name the field, so a bad message
fails in the caller's stack rather than in the ingest's quarantine. `CheckRequest` has the
attributes of a `Message` (topic, body, keys, tags, properties, queue_id, transaction_id,
msg_id) plus `check_number`, so a listener can treat both alike, as RocketMQ's
`checkLocalTransaction(MessageExt)` does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from coordinator.protocol import ingress as fmt
from coordinator.protocol.check_record import CheckRecord
from coordinator.protocol.names import topic_name_problem, transaction_id_problem
from coordinator.protocol.records import Headers, half_headers
from coordinator.sdk.state import LocalTransactionState

_PROPERTY_NAME = re.compile(fmt.PROPERTY_NAME_PATTERN)


def _as_keys(value: object) -> tuple[str, ...]:
    # A lone string is one key (RocketMQ's setKeys(String)), not a sequence of characters.
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, Iterable):
        raise TypeError(f"keys must be a list of strings, not {type(value).__name__}")
    keys = tuple(value)
    for key in keys:
        if not isinstance(key, str):
            raise TypeError(f"keys must be strings, not {type(key).__name__} ({key!r})")
    return keys


def _as_properties(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise TypeError(f"properties must be a mapping of str to str, not {type(value).__name__}")
    result: dict[str, str] = {}
    for name, text in value.items():
        if not isinstance(name, str) or not _PROPERTY_NAME.fullmatch(name):
            raise ValueError(
                "properties: a property name must be a string of 1-255 characters without "
                f"control characters ({name!r})"
            )
        if not isinstance(text, str):
            raise TypeError(f"properties[{name!r}] must be a string, not {type(text).__name__}")
        if name == fmt.PRODUCER_INSTANCE_PROPERTY:
            raise ValueError(
                f"properties: {name!r} is set by the producer (the instance its checks go to "
                "first), not by a message"
            )
        result[name] = text
    return result


def _optional_int(value: object, name: str, low: int, high: int | None = None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {bound}, not {value}")
    return value


@dataclass(frozen=True)
class Message:
    """A message to send in a transaction; see the module docstring.

    `transaction_id` may be chosen by the caller (store it with the business row, so
    a check can answer from durable state); otherwise the producer generates one. The
    producer fills `transaction_id` and `msg_id` in the copy it hands to the listener.
    """

    topic: str
    body: bytes = b""
    keys: Sequence[str] = ()  # stored as a tuple
    tags: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)  # stored as a dict
    queue_id: int | None = None
    check_immunity_seconds: int | None = None
    transaction_id: str | None = None
    msg_id: str | None = None

    def __post_init__(self) -> None:
        problem = topic_name_problem(self.topic)
        if problem is not None:
            raise ValueError(problem)
        body: object = self.body
        if isinstance(body, str):
            raise TypeError("body must be bytes, not str: encode the text first (text.encode())")
        if not isinstance(body, bytes | bytearray | memoryview):
            raise TypeError(f"body must be bytes, not {type(body).__name__}")
        object.__setattr__(self, "body", bytes(body))
        object.__setattr__(self, "keys", _as_keys(self.keys))
        object.__setattr__(self, "properties", _as_properties(self.properties))
        if self.tags is not None and not isinstance(self.tags, str):
            raise TypeError(f"tags must be a string, not {type(self.tags).__name__}")
        _optional_int(self.queue_id, "queue_id", 0, fmt.MAX_QUEUE_ID)
        _optional_int(self.check_immunity_seconds, "check_immunity_seconds", 0)
        if self.transaction_id is not None:
            problem = transaction_id_problem(self.transaction_id)
            if problem is not None:
                raise ValueError(problem)
        if self.msg_id is not None and not isinstance(self.msg_id, str):
            raise TypeError(f"msg_id must be a string, not {type(self.msg_id).__name__}")
        self._check_header_budget()

    def half_headers(self, group: str, born_at_ms: int, instance: str | None = None) -> Headers:
        """Return the headers of this message's half record for producer group `group`.

        `instance` is the sending producer instance, to which its checks go first.
        """
        return half_headers(
            group,
            self.topic,
            born_at_ms,
            queue_id=self.queue_id,
            keys=self.keys or None,
            tags=self.tags,
            properties=self.with_instance(instance),
            check_immunity_seconds=self.check_immunity_seconds,
        )

    def with_instance(self, instance: str | None) -> Mapping[str, str]:
        """Return the properties the half carries: the message's, and the sending instance."""
        if instance is None:
            return self.properties
        return {**self.properties, fmt.PRODUCER_INSTANCE_PROPERTY: instance}

    def _check_header_budget(self) -> None:
        """Refuse keys, tags and properties the ingest would quarantine (HEADER_BUDGET)."""
        # With the longest instance id a producer may add (PRODUCER_INSTANCE_PATTERN).
        size = fmt.budgeted_bytes(self.half_headers("group", 0, "i" * 64))
        if size > fmt.HEADER_BUDGET:
            raise ValueError(
                f"keys, tags and properties take {size} bytes together; at most "
                f"{fmt.HEADER_BUDGET} are allowed"
            )


@dataclass(frozen=True)
class SendResult:
    """What `send_message_in_transaction` did: the stored half and the op it sent.

    `op_id` is None when the op could not be sent; the coordinator's check will then ask
    the group again, so the transaction is not lost.
    """

    transaction_id: str
    msg_id: str
    local_state: LocalTransactionState
    stored_at: datetime
    partition: int | None = None
    offset: int | None = None
    op_id: str | None = None

    @property
    def op_sent(self) -> bool:
        """Return True if the op record of `local_state` was acknowledged."""
        return self.op_id is not None


@dataclass(frozen=True)
class CheckRequest(CheckRecord):
    """ "Tell me the state of transaction X": one item of the check topic or the long poll.

    The fields are the check record's (coordinator/protocol/check_record.py). `source` is where the
    transport read it (for acknowledgement); it takes no part in equality. The request's
    identity is `key`: (transaction_id, check_number). When `omitted` is not empty, the
    message itself is in system/check_requests.
    """

    source: tuple[str, int, int] | None = field(default=None, compare=False, repr=False)
    #: True when read by this instance's own reader as addressed to it, outside the group
    #: (coordinator/sdk/check_routing.py): its acknowledgement is a claim, not an offset.
    addressed: bool = field(default=False, compare=False, repr=False)

    @property
    def key(self) -> tuple[str, int]:
        """Return (transaction_id, check_number): the identity used to skip duplicates."""
        return (self.transaction_id, self.check_number)

    @property
    def check_immunity_seconds(self) -> None:
        """Return None: a check request does not carry the immunity (Message-like view)."""
        return None

    @property
    def message(self) -> Message:
        """Return the checked message as a `Message` with transaction_id and msg_id set."""
        return Message(
            topic=self.topic,
            body=self.body,
            keys=self.keys,
            tags=self.tags,
            # The sending instance is the producer's to set, not the message's.
            properties={
                name: text
                for name, text in self.properties.items()
                if name != fmt.PRODUCER_INSTANCE_PROPERTY
            },
            queue_id=self.queue_id,
            transaction_id=self.transaction_id,
            msg_id=self.msg_id,
        )

    @classmethod
    def from_json(
        cls,
        value: Mapping[str, Any] | bytes | str,
        source: tuple[str, int, int] | None = None,
        *,
        addressed: bool = False,
    ) -> CheckRequest:
        """Parse the check topic's value with the protocol's codec (CheckRecord.decode)."""
        return replace(cls.decode(value), source=source, addressed=addressed)
