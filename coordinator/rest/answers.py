"""The large answers (receives, check polls, acks) as JSON bytes, rendered off the event loop.

A returned model is encoded by FastAPI on the event loop, and a body of 1 MiB of NUL bytes is
7.3 MiB of JSON (`\\u0000` is six bytes; pydantic's peak was 14.7 times the body): while it
ran, every other request, `/healthz` too, waited. So these answers are rendered here, as
bytes, on the thread that built them (a long-poll thread, or FastAPI's pool for a plain
function), and returned as a ready Response; the models in models.py stay their schema.

Every item of an answer is measured as it is rendered, so that the caller stops taking
items at `rest.max_answer_size` (less `item_budget`'s allowance for what surrounds them)
before any is handed out.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from fastapi import Response
from pydantic import BaseModel

from coordinator.rest.models import BodyEncoding, CheckRequest
from coordinator.sdk.consumer import MessageView

__all__ = [
    "ENVELOPE_ALLOWANCE",
    "check_answer",
    "item_budget",
    "json_response",
    "message_json",
    "model_response",
    "receive_answer",
]

#: Room kept in an answer's budget for what surrounds its items (`{"member":...,
#: "messages":[` and `]}`; a member id is at most 255 characters of [A-Za-z0-9_-]).
ENVELOPE_ALLOWANCE = 512
MEDIA_TYPE = "application/json"


def _dumps(value: Any) -> bytes:
    """Return `value` as compact UTF-8 JSON (as Starlette's JSONResponse renders it)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def item_budget(max_answer_size: int, max_items: int) -> int:
    """Return the bytes up to `max_items` rendered items may take together in an answer of
    at most `max_answer_size` (less the envelope, and a comma between two items)."""
    return max(1, max_answer_size - ENVELOPE_ALLOWANCE - max_items)


def _rfc3339(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:  # the tables' timestamps are UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _text(body: bytes) -> str | None:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None


def message_json(message: MessageView, receipt: str, encoding: BodyEncoding) -> bytes:
    """Return one DeliveredMessage as JSON: its body once, as `encoding` asks (text only
    when it is UTF-8, else base64)."""
    text = _text(message.body) if encoding == "text" else None
    return _dumps(
        {
            "topic": message.topic,
            "queue_id": message.queue_id,
            "queue_offset": message.queue_offset,
            "msg_id": message.msg_id,
            "transaction_id": message.transaction_id,
            "producer_group": message.producer_group,
            "body": text,
            "body_base64": None if text is not None else base64.b64encode(message.body).decode(),
            "keys": list(message.keys),
            "tags": message.tag,
            "properties": dict(message.properties),
            "prepared_at": _rfc3339(message.prepared_at),
            "committed_at": _rfc3339(message.committed_at) or "",
            "delivered_at": _rfc3339(message.delivered_at) or "",
            "delivery_attempt": message.delivery_attempt,
            "receipt": receipt,
        }
    )


def receive_answer(member: str, messages: Iterable[bytes]) -> bytes:
    """Return a ReceiveResult as JSON, from its messages rendered by `message_json`."""
    return b"".join([b'{"member":', _dumps(member), b',"messages":[', b",".join(messages), b"]}"])


def check_answer(requests: Iterable[CheckRequest]) -> bytes:
    """Return a CheckRequests as JSON (each request rendered once, when it was collected)."""
    return b"".join([b'{"check_requests":[', b",".join(r.json_bytes() for r in requests), b"]}"])


def json_response(data: bytes, status_code: int = 200) -> Response:
    """Return a JSON answer rendered already."""
    return Response(content=data, status_code=status_code, media_type=MEDIA_TYPE)


def model_response(model: BaseModel) -> Response:
    """Return `model` rendered here (on the calling thread, not the event loop)."""
    return json_response(model.model_dump_json().encode())
