"""A validated request -> the Kafka record the ingest parses (coordinator/protocol/ingress.py).

Pure functions. The rules that need the configuration or the whole record live here:

- the body (decoded bytes) must be at most `max_message_size`, as the ingest requires;
- check_immunity_seconds must be at most `max_check_immunity` (contract 4; RocketMQ proxy's
  maxTransactionRecoverySecond): a producer cannot park a half for days;
- keys, tags and properties together must fit HEADER_BUDGET bytes. RocketMQ keeps a
  message's properties (keys and tags among them) behind a 2-byte length (MessageDecoder,
  at most Short.MAX_VALUE); the same budget keeps every record inside the ingress topics'
  `max.message.bytes` (max_message_size + coordinator.protocol.ingress.HEADER_ALLOWANCE_BYTES).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from coordinator.protocol import ingress as fmt
from coordinator.protocol.records import half_headers, op_headers
from coordinator.rest.errors import ApiError
from coordinator.rest.models import MAX_IMMUNITY_SECONDS, OpRequest, SendRequest

HEADER_BUDGET = fmt.HEADER_BUDGET
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Record:
    """One Kafka record: key, value and headers, ready for the producer."""

    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


def new_transaction_id() -> str:
    """Return a fresh transaction id (uuid4, hex)."""
    return uuid.uuid4().hex


def rfc3339(epoch_ms: int) -> str:
    """Return epoch milliseconds as RFC 3339 UTC, e.g. 2025-01-02T03:04:05.678Z."""
    moment = _EPOCH + timedelta(milliseconds=epoch_ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def half_record(
    request: SendRequest,
    transaction_id: str,
    max_message_size: int,
    received_ms: int,
    field: str = "",
    *,
    max_immunity: int = MAX_IMMUNITY_SECONDS,
    allowed_topics: tuple[str, ...] | None = None,
) -> Record:
    """Return the half-topic record of `request`; refuse a body or headers that are too
    large, a check immunity above `max_immunity` seconds (config max_check_immunity), or a
    topic not in `allowed_topics` (config topics, when auto_create_topic_enable is off;
    None: any topic).

    `field` prefixes the names in error messages (`messages[3].` in a batch).
    """
    if allowed_topics is not None and request.topic not in allowed_topics:
        raise ApiError(
            400,
            "topic_not_allowed",
            f"{field}topic: {request.topic!r} is not one of the configured topics "
            "(auto_create_topic_enable is off: add it to `topics`)",
        )
    immunity = request.check_immunity_seconds
    if immunity is not None and immunity > max_immunity:
        raise ApiError(
            400,
            "invalid_request",
            f"{field}check_immunity_seconds: {immunity} is more than max_check_immunity "
            f"({max_immunity} seconds)",
        )
    body = request.body_bytes
    if len(body) > max_message_size:
        which = "body_base64" if request.body_base64 is not None else "body"
        raise ApiError(
            413,
            "too_large",
            f"{field}{which}: the body is {len(body)} bytes, larger than max_message_size "
            f"({max_message_size} bytes)",
        )
    # born_at: the REST's receive time; the store time is the broker's LogAppendTime.
    headers = half_headers(
        request.producer_group,
        request.topic,
        received_ms,
        queue_id=request.queue_id,
        keys=request.keys,
        tags=request.tags,
        properties=request.properties,
        check_immunity_seconds=request.check_immunity_seconds,
    )
    size = fmt.budgeted_bytes(headers)
    if size > HEADER_BUDGET:
        raise ApiError(
            413,
            "too_large",
            f"{field}keys, tags and properties take {size} bytes together; at most "
            f"{HEADER_BUDGET} are allowed",
        )
    return Record(key=transaction_id.encode(), value=body, headers=headers)


def op_record(transaction_id: str, op: str, request: OpRequest, received_ms: int) -> Record:
    """Return the op-topic record of one COMMIT, ROLLBACK or UNKNOWN."""
    headers = op_headers(
        request.producer_group,
        op,
        request.from_check,
        received_ms,
        operator=request.operator,
        reason=request.reason,
    )
    return Record(key=transaction_id.encode(), value=b"", headers=headers)
