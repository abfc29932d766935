"""What a producer sends (`Message`), gets back (`SendResult`) and is asked (`CheckRequest`).

`Message` is checked when built, with messages that name the field, so a bad message
fails in the caller's stack rather than in the ingest's quarantine. `CheckRequest` has the
attributes of a `Message` (topic, body, keys, tags, properties, queue_id, transaction_id,
msg_id) plus `check_number`, so a listener can treat both alike, as RocketMQ's
`checkLocalTransaction(MessageExt)` does.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from coordinator.sdk.state import LocalTransactionState
from delta_tables.topics import topic_name_problem
from streams import ingress_format as fmt

_TRANSACTION_ID = re.compile(fmt.TRANSACTION_ID_PATTERN)
_PROPERTY_NAME = re.compile(fmt.PROPERTY_NAME_PATTERN)


def transaction_id_problem(value: object) -> str | None:
    """Return why `value` cannot be a transaction id, or None if it can."""
    if not isinstance(value, str):
        return f"transaction_id must be a string, not {type(value).__name__}"
    if not _TRANSACTION_ID.fullmatch(value):
        return f"transaction_id must be 1-128 printable ASCII characters, not {value[:140]!r}"
    return None


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

    def _check_header_budget(self) -> None:
        """Refuse keys, tags and properties the ingest would quarantine (HEADER_BUDGET)."""
        optional = [
            (fmt.KEYS, json.dumps(list(self.keys)).encode()) if self.keys else None,
            (fmt.TAGS, self.tags.encode()) if self.tags is not None else None,
            *[(fmt.PROPERTY_PREFIX + k, v.encode()) for k, v in self.properties.items()],
        ]
        size = fmt.budgeted_bytes(h for h in optional if h is not None)
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


def _field(value: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    item = value.get(name)
    if not isinstance(item, kind) or isinstance(item, bool):
        raise ValueError(f"check request field {name!r} is missing or not {kind}: {item!r}")
    return item


@dataclass(frozen=True)
class CheckRequest:
    """ "Tell me the state of transaction X": one item of the check topic or the long poll.

    `source` is where the transport read it (for acknowledgement); it takes no part in
    equality. The request's identity is `key`: (transaction_id, check_number).
    """

    transaction_id: str
    msg_id: str
    producer_group: str
    topic: str
    queue_id: int | None
    body: bytes
    keys: tuple[str, ...]
    tags: str | None
    properties: dict[str, str]
    check_number: int
    prepared_at_ms: int | None = None
    requested_at_ms: int | None = None
    #: What the coordinator left out of a check too large for the check topic ("body",
    #: "keys", ...): empty for a whole one. The message itself is in system/check_requests.
    omitted: tuple[str, ...] = ()
    source: tuple[str, int, int] | None = field(default=None, compare=False, repr=False)

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
            topic=self.topic, body=self.body, keys=self.keys, tags=self.tags,
            properties=self.properties, queue_id=self.queue_id,
            transaction_id=self.transaction_id, msg_id=self.msg_id,
        )  # fmt: skip

    @classmethod
    def from_json(
        cls, value: Mapping[str, Any] | bytes | str, source: tuple[str, int, int] | None = None
    ) -> CheckRequest:
        """Parse the check topic's JSON value (streams/coordinator_writer.py check_record)."""
        if isinstance(value, bytes | str):
            try:
                value = json.loads(value)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ValueError(f"check request is not JSON: {exc}") from None
        if not isinstance(value, Mapping):
            raise ValueError(f"check request must be a JSON object, not {type(value).__name__}")
        try:
            body = base64.b64decode(value.get("body_base64") or "", validate=True)
        except (binascii.Error, TypeError) as exc:
            raise ValueError(f"check request field 'body_base64' is not base64: {exc}") from None
        keys = value.get("keys") or []
        properties = value.get("properties") or {}
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise ValueError(f"check request field 'keys' is not a list of strings: {keys!r}")
        if not isinstance(properties, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in properties.items()
        ):
            raise ValueError(
                f"check request field 'properties' is not a string map: {properties!r}"
            )
        omitted = value.get("omitted") or []
        if not isinstance(omitted, list) or not all(isinstance(o, str) for o in omitted):
            raise ValueError(f"check request field 'omitted' is not a list of strings: {omitted!r}")
        tags = value.get("tags")
        if tags is not None and not isinstance(tags, str):
            raise ValueError(f"check request field 'tags' is not a string: {tags!r}")
        optional = {}
        for name in ("queue_id", "prepared_at_ms", "requested_at_ms"):
            item = value.get(name)
            if item is not None and (isinstance(item, bool) or not isinstance(item, int)):
                raise ValueError(f"check request field {name!r} is not an integer: {item!r}")
            optional[name] = item
        return cls(
            transaction_id=_field(value, "transaction_id", str),
            msg_id=_field(value, "msg_id", str),
            producer_group=_field(value, "producer_group", str),
            topic=_field(value, "topic", str),
            body=body,
            keys=tuple(keys),
            tags=tags,
            properties=dict(properties),
            check_number=_field(value, "check_number", int),
            omitted=tuple(omitted),
            source=source,
            **optional,
        )
