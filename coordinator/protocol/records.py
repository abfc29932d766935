"""The half and op records of the Kafka ingress (contract 5.2): their headers, built in one place.

Pure functions over plain values: the SDK's Kafka transport, the REST ingress and the operator
commands send what these return, and the ingest parses them (streams/ingest/transforms.py, the rules
of coordinator/protocol/ingress.py). Ids are the ingest's own derivations (`msg_id_of`, `op_id_of`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from coordinator.protocol import ingress as fmt

Headers = list[tuple[str, bytes]]


def half_headers(
    group: str,
    topic: str,
    born_at_ms: int,
    *,
    queue_id: int | None = None,
    keys: Sequence[str] | None = None,
    tags: str | None = None,
    properties: Mapping[str, str] | None = None,
    check_immunity_seconds: int | None = None,
) -> Headers:
    """Return the headers of a half record; None leaves an optional header out.

    The body is the record's value and the transaction id its key. born_at is recorded only:
    the store time is always the broker's LogAppendTime.
    """
    headers: Headers = [(fmt.PRODUCER_GROUP, group.encode()), (fmt.TOPIC, topic.encode())]
    if queue_id is not None:
        headers.append((fmt.QUEUE_ID, str(queue_id).encode()))
    if keys is not None:
        headers.append((fmt.KEYS, json.dumps(list(keys)).encode()))
    if tags is not None:
        headers.append((fmt.TAGS, tags.encode()))
    if check_immunity_seconds is not None:
        headers.append((fmt.CHECK_IMMUNITY_SECONDS, str(check_immunity_seconds).encode()))
    headers.append((fmt.BORN_AT, str(born_at_ms).encode()))
    headers += [(fmt.PROPERTY_PREFIX + k, v.encode()) for k, v in (properties or {}).items()]
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

    `operator` (who) and `reason` (why) make it an operator's op (contract 3).
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


def operator_label(principal: str, display: str | None) -> str:
    """Return the recorded "who" of an operator's op: the authenticated principal, and the
    name the operator gave beside it when it differs ("alice (Alice Smith)").

    The ingest derives the same form from an operator topic's principal
    (streams/ingest/transforms.py); at most MAX_OPERATOR_LENGTH characters (the display name is
    cut).
    """
    if not display or display == principal:
        return principal[: fmt.MAX_OPERATOR_LENGTH]
    room = fmt.MAX_OPERATOR_LENGTH - len(principal) - 3
    return principal if room < 1 else f"{principal} ({display[:room]})"
