"""Kafka ingress records of SPEC 5.2, built exactly as protocol/ingress.py documents.

Pure functions: the Kafka transport sends what these return, and tests compare against
them. Ids are the ingest's own derivations (protocol/ingress.py `msg_id_of`,
`op_id_of`), re-exported here, so SDK, REST and the Delta tables agree.
"""

from __future__ import annotations

import json

from coordinator.sdk.message import Message
from protocol import ingress as fmt
from protocol.ingress import msg_id_of, op_id_of

__all__ = ["Headers", "half_headers", "msg_id_of", "op_headers", "op_id_of"]

Headers = list[tuple[str, bytes]]


def half_headers(group: str, message: Message, born_at_ms: int) -> Headers:
    """Return the headers of the half record of `message` for producer group `group`."""
    headers: Headers = [(fmt.PRODUCER_GROUP, group.encode()), (fmt.TOPIC, message.topic.encode())]
    if message.queue_id is not None:
        headers.append((fmt.QUEUE_ID, str(message.queue_id).encode()))
    if message.keys:
        headers.append((fmt.KEYS, json.dumps(list(message.keys)).encode()))
    if message.tags is not None:
        headers.append((fmt.TAGS, message.tags.encode()))
    if message.check_immunity_seconds is not None:
        headers.append((fmt.CHECK_IMMUNITY_SECONDS, str(message.check_immunity_seconds).encode()))
    headers.append((fmt.BORN_AT, str(born_at_ms).encode()))
    headers += [(fmt.PROPERTY_PREFIX + k, v.encode()) for k, v in message.properties.items()]
    return headers


def op_headers(
    group: str,
    op: str,
    from_check: bool,
    born_at_ms: int,
    *,
    operator: str | None = None,
    reason: str | None = None,
) -> Headers:
    """Return the headers of an op record (COMMIT, ROLLBACK, UNKNOWN; RESUME by an operator).

    `operator` (who) and `reason` (why) make it an operator's op (SPEC 3).
    """
    allowed = (*fmt.OPS, *fmt.OPERATOR_OPS) if operator is not None else fmt.OPS
    if op not in allowed:
        raise ValueError(f"op must be one of {', '.join(allowed)}, not {op!r}")
    if reason is not None and operator is None:
        raise ValueError("a reason needs an operator")
    headers = [
        (fmt.PRODUCER_GROUP, group.encode()),
        (fmt.OP, op.encode()),
        (fmt.FROM_CHECK, b"true" if from_check else b"false"),
    ]
    if operator is not None:
        headers.append((fmt.OPERATOR, operator.encode()))
    if reason is not None:
        headers.append((fmt.REASON, reason.encode()))
    headers.append((fmt.BORN_AT, str(born_at_ms).encode()))
    return headers
