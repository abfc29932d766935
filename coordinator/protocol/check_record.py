"""The check topic's record: one codec for the coordinator that writes it and every reader.

The coordinator publishes one record per check request (RocketMQ's
CHECK_TRANSACTION_STATE) on the check topic (streams/kafka_io/check_topic.py sizes the topic):

    key       transaction id (UTF-8)
    value     a JSON object, `CheckRecord.to_value()`
    headers   txcoord.producer_group: the group asked, so a reader filters without parsing;
              txcoord.producer_instance: the instance that sent the half, when it said so
              (its checks go to it first; coordinator/sdk/check_routing.py)

`encode` is the writer's, `decode` every reader's: the SDK's Kafka and REST transports, the
REST ingress's long poll and the tests' responder. A record too large for the topic is
published *slim* (`slim`): without the body, keys, tags and properties, with `omitted`,
`omitted_reason`, `body_size` and where the whole message is (`message_in`).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Self

from coordinator.protocol.ingress import (
    PRODUCER_GROUP,
    PRODUCER_INSTANCE,
    PRODUCER_INSTANCE_PATTERN,
    PRODUCER_INSTANCE_PROPERTY,
)

_INSTANCE = re.compile(PRODUCER_INSTANCE_PATTERN)

#: A Kafka record as a producer sends it: key, value, headers.
Record = tuple[bytes, bytes, list[tuple[str, bytes]]]

#: What a slim record leaves out.
OMITTED = ("body", "keys", "tags", "properties")


@dataclass(frozen=True)
class CheckRecord:
    """One check request as it travels: "tell me the state of transaction X"."""

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
    #: "keys", ...): empty for a whole one.
    omitted: tuple[str, ...] = ()
    omitted_reason: str | None = None
    #: The size of the body a slim record left out.
    body_size: int | None = None
    #: The table that keeps the whole message of a slim record.
    message_in: str | None = None
    #: The producer instance that sent the half (its property txcoord.producer_instance), to
    #: which the check goes first; kept by a slim record.
    producer_instance: str | None = None

    def slim(self, reason: str, message_in: str) -> Self:
        """Return this record without the body, keys, tags and properties, saying why."""
        return replace(
            self,
            body=b"",
            keys=(),
            tags=None,
            properties={},
            omitted=OMITTED,
            omitted_reason=reason,
            body_size=len(self.body),
            message_in=message_in,
        )

    def to_value(self) -> dict[str, Any]:
        """Return the JSON object of the record's value (the REST long poll returns it too)."""
        value: dict[str, Any] = {
            "transaction_id": self.transaction_id,
            "msg_id": self.msg_id,
            "producer_group": self.producer_group,
            "topic": self.topic,
            "queue_id": self.queue_id,
            "body_base64": base64.b64encode(self.body).decode(),
            "keys": list(self.keys),
            "tags": self.tags,
            "properties": dict(self.properties),
            "check_number": self.check_number,
            "prepared_at_ms": self.prepared_at_ms,
            "requested_at_ms": self.requested_at_ms,
        }
        if self.body_size is not None:
            value["body_size"] = self.body_size
        if self.producer_instance is not None:
            value["producer_instance"] = self.producer_instance
        if self.omitted:
            value.update(
                omitted=list(self.omitted),
                omitted_reason=self.omitted_reason,
                message_in=self.message_in,
            )
        return value

    def encode(self) -> Record:
        """Return (key, value, headers) of the check-topic record."""
        headers = [(PRODUCER_GROUP, self.producer_group.encode())]
        if self.producer_instance is not None:
            headers.append((PRODUCER_INSTANCE, self.producer_instance.encode()))
        return self.transaction_id.encode(), json.dumps(self.to_value()).encode(), headers

    @classmethod
    def decode(cls, value: Mapping[str, Any] | bytes | str) -> Self:
        """Parse a check record's value (JSON bytes or text, or the parsed object).

        Raises ValueError naming the field when the value is not a check record. Unknown
        fields are ignored, so a newer coordinator may add some.
        """
        return cls(**_fields(value))


def _field(value: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    item = value.get(name)
    if not isinstance(item, kind) or isinstance(item, bool):
        raise ValueError(f"check request field {name!r} is missing or not {kind}: {item!r}")
    return item


def _strings(value: Mapping[str, Any], name: str) -> tuple[str, ...]:
    items = value.get(name) or []
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ValueError(f"check request field {name!r} is not a list of strings: {items!r}")
    return tuple(items)


def _optional(value: Mapping[str, Any], name: str, kind: type) -> Any:
    item = value.get(name)
    if item is not None and (isinstance(item, bool) or not isinstance(item, kind)):
        what = "an integer" if kind is int else "a string"
        raise ValueError(f"check request field {name!r} is not {what}: {item!r}")
    return item


def _fields(value: Mapping[str, Any] | bytes | str) -> dict[str, Any]:
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
    properties = value.get("properties") or {}
    if not isinstance(properties, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in properties.items()
    ):
        raise ValueError(f"check request field 'properties' is not a string map: {properties!r}")
    return {
        "transaction_id": _field(value, "transaction_id", str),
        "msg_id": _field(value, "msg_id", str),
        "producer_group": _field(value, "producer_group", str),
        "topic": _field(value, "topic", str),
        "queue_id": _optional(value, "queue_id", int),
        "body": body,
        "keys": _strings(value, "keys"),
        "tags": _optional(value, "tags", str),
        "properties": dict(properties),
        "check_number": _field(value, "check_number", int),
        "prepared_at_ms": _optional(value, "prepared_at_ms", int),
        "requested_at_ms": _optional(value, "requested_at_ms", int),
        "omitted": _strings(value, "omitted"),
        "omitted_reason": _optional(value, "omitted_reason", str),
        "body_size": _optional(value, "body_size", int),
        "message_in": _optional(value, "message_in", str),
        "producer_instance": _optional(value, "producer_instance", str),
    }


def instance_of(properties: Mapping[str, str]) -> str | None:
    """Return the producer instance a half's properties name, or None (absent or not an id)."""
    instance = properties.get(PRODUCER_INSTANCE_PROPERTY)
    return instance if instance is not None and _INSTANCE.fullmatch(instance) else None
