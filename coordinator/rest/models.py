"""Request and response bodies of the REST ingress (contract 5.1).

Types are strict: a JSON number is not a string and a string is not a number, a bool is not
an integer, and unknown fields are refused (a misspelt `bodyBase64` must not silently send
an empty body). Every rule mirrors the ingest's (streams/ingest/transforms.py), so nothing this API
accepts is quarantined later:

    producer_group   GROUP_PATTERN (RocketMQ's Validators.checkGroup, less '%' and '|')
    transaction_id   TRANSACTION_ID_PATTERN (printable ASCII, 1..128)
    topic            TOPIC_NAME, then coordinator.protocol.names.topic_name_problem (refused as
                     `invalid_topic`)

Every name rule matches the whole string (`re.fullmatch`): `re.match` with a `$` anchor
accepts a trailing newline ("OrderPaid\n"), which would then travel in a Kafka header.
Pydantic's `pattern` is not used for them: it searches (an unanchored pattern matches part
of a string) and its engine depends on the pattern; `matching()` is the one rule, shared
with the query and path parameters of routes.py.
    queue_id         0..MAX_QUEUE_ID
    body_base64      must decode (standard alphabet, padded)
    every string     valid UTF-8: JSON may carry a lone surrogate (\\ud800), which no UTF-8
                     encoder accepts, so it is refused here instead of failing the write
    properties       names usable as Kafka header suffixes (`prop.<name>`)

Rules that depend on the configuration (max_message_size) and on the whole record (the
header budget) are applied by records.py.

The consumers' bodies (consumer_routes.py) follow the same rules: a consumer group and a
member id match GROUP_PATTERN, a topic the topic rule, a tag expression RocketMQ's
(coordinator/sdk/consumer/tag_filter.py); the longest wait comes from the configuration
(`receive_request`).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    create_model,
    model_validator,
)
from pydantic_core import PydanticCustomError

from coordinator.protocol import ingress as fmt
from coordinator.protocol.names import TOPIC_NAME, TOPIC_RULE_TEXT, topic_name_problem
from coordinator.rest.receipts import MAX_RECEIPT_LENGTH
from coordinator.sdk.consumer.tag_filter import TagFilter

#: Codes of the custom validation errors that errors.py maps to their own answers.
INVALID_TOPIC = "invalid_topic"
INVALID_TEXT = "invalid_text"

#: The ingest reads check_immunity_seconds with `try_cast(... as int)`: a larger value
#: would silently fall back to the timeout, so it is refused here; the configured bound
#: (max_check_immunity, smaller) is applied by records.py.
MAX_IMMUNITY_SECONDS = 2**31 - 1
MAX_BATCH = 1000
#: Property names become header keys `prop.<name>` (the ingest's rule, fmt.PROPERTY_NAME_PATTERN).
_PROPERTY_NAME = re.compile(fmt.PROPERTY_NAME_PATTERN)
#: coordinator.protocol.ingress.OPS as a type (a Literal must be spelt out;
#: tests/coordinator/protocol checks they agree).
OPS = Literal["COMMIT", "ROLLBACK", "UNKNOWN"]


def _utf8(value: str) -> str:
    """Refuse a string that cannot be encoded as UTF-8 (a lone surrogate from JSON)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PydanticCustomError(
            INVALID_TEXT, "must be valid UTF-8 text (it contains a lone surrogate)"
        ) from None
    return value


def matching(pattern: str, what: str) -> Callable[[str], str]:
    """Return a validator that accepts a string only if `pattern` matches all of it."""
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise PydanticCustomError(
                "invalid_name",
                "{what} must match {pattern} (the whole string)",
                {"what": what, "pattern": pattern},
            )
        return value

    return check


def _topic(value: str) -> str:
    if not TOPIC_NAME.fullmatch(_utf8(value)):
        raise PydanticCustomError(
            INVALID_TOPIC,
            f"{TOPIC_RULE_TEXT}, with no newline or control character",
        )
    problem = topic_name_problem(value)
    if problem:
        raise PydanticCustomError(INVALID_TOPIC, "{problem}", {"problem": problem})
    return value


def _property_name(value: str) -> str:
    if not _PROPERTY_NAME.fullmatch(_utf8(value)):
        raise PydanticCustomError(
            "invalid_property_name",
            "property names must be 1-255 characters without control characters",
        )
    return value


Text = Annotated[StrictStr, AfterValidator(_utf8)]
ProducerGroup = Annotated[
    StrictStr,
    AfterValidator(matching(fmt.GROUP_PATTERN, "a producer group")),
    Field(json_schema_extra={"pattern": fmt.GROUP_PATTERN}),
]
TransactionId = Annotated[
    StrictStr,
    AfterValidator(matching(fmt.TRANSACTION_ID_PATTERN, "a transaction id")),
    Field(json_schema_extra={"pattern": fmt.TRANSACTION_ID_PATTERN}),
]
Topic = Annotated[
    StrictStr,
    AfterValidator(_topic),
    Field(json_schema_extra={"pattern": TOPIC_NAME.pattern, "maxLength": 127}),
]
QueueId = Annotated[StrictInt, Field(ge=0, le=fmt.MAX_QUEUE_ID)]
PropertyName = Annotated[StrictStr, AfterValidator(_property_name)]
Operator = Annotated[Text, Field(min_length=1, max_length=fmt.MAX_OPERATOR_LENGTH)]
OperatorReason = Annotated[Text, Field(max_length=fmt.MAX_REASON_LENGTH)]
ImmunitySeconds = Annotated[StrictInt, Field(ge=0, le=MAX_IMMUNITY_SECONDS)]

_STRICT = ConfigDict(strict=True, extra="forbid")


class SendRequest(BaseModel):
    """A half message to store (POST /v1/transactions)."""

    model_config = _STRICT

    producer_group: ProducerGroup
    topic: Topic
    queue_id: QueueId | None = None
    body: Text | None = Field(default=None, description="UTF-8 text body")
    body_base64: StrictStr | None = Field(default=None, description="binary body, base64")
    keys: list[Text] | None = None
    tags: Text | None = None
    properties: dict[PropertyName, Text] | None = None
    transaction_id: TransactionId | None = Field(
        default=None, description="generated (uuid4 hex) when absent"
    )
    check_immunity_seconds: ImmunitySeconds | None = None

    _body_bytes: bytes = PrivateAttr(default=b"")

    @model_validator(mode="after")
    def _decode_body(self) -> SendRequest:
        if self.body is not None and self.body_base64 is not None:
            raise PydanticCustomError(
                "body_conflict", "give at most one of body and body_base64, not both"
            )
        if self.body is not None:
            self._body_bytes = self.body.encode("utf-8")
        elif self.body_base64 is not None:
            try:
                self._body_bytes = base64.b64decode(self.body_base64, validate=True)
            except (binascii.Error, ValueError):
                raise PydanticCustomError(
                    "invalid_base64", "body_base64 is not valid base64 (standard alphabet, padded)"
                ) from None
        return self

    @property
    def body_bytes(self) -> bytes:
        """Return the message body: the UTF-8 text, the decoded base64, or empty."""
        return self._body_bytes


class SendBatchRequest(BaseModel):
    """Several half messages, validated together (POST /v1/transactions/batch)."""

    model_config = _STRICT

    messages: Annotated[list[SendRequest], Field(min_length=1, max_length=MAX_BATCH)]


class OpRequest(BaseModel):
    """The body of POST /v1/transactions/{id}/commit, /rollback and /unknown.

    `operator` and `reason` make it an operator's op (contract 3: it may end a DISCARDED
    transaction); only an admin token may set them.
    """

    model_config = _STRICT

    producer_group: ProducerGroup
    from_check: StrictBool = False
    operator: Operator | None = None
    reason: OperatorReason | None = None

    @model_validator(mode="after")
    def _reason_needs_operator(self) -> OpRequest:
        if self.reason is not None and self.operator is None:
            raise PydanticCustomError("reason_without_operator", "reason needs operator")
        return self


class OpItem(OpRequest):
    """One op of POST /v1/ops/batch."""

    transaction_id: TransactionId
    op: OPS


class OpBatchRequest(BaseModel):
    """Several op records, validated together (POST /v1/ops/batch)."""

    model_config = _STRICT

    ops: Annotated[list[OpItem], Field(min_length=1, max_length=MAX_BATCH)]


class ErrorBody(BaseModel):
    """Every error answer."""

    error: str = Field(description="a stable code: invalid_request, forbidden, ...")
    message: str = Field(description="what is wrong, naming the field")


class SendResult(BaseModel):
    """A half message durable in the half topic."""

    transaction_id: str
    msg_id: str
    status: Literal["PREPARED"] = "PREPARED"
    stored_at: str = Field(description="the broker's LogAppendTime, RFC 3339 UTC")
    partition: int
    offset: int


_ITEM_STATUS = (
    "this item's own status: {ok} = durable in Kafka (`result`); 413 = refused as too large, "
    "503 = not acknowledged (`error`), send it again"
)


class SendBatchItem(BaseModel):
    """One message of a batch send: durable (`result`) or not (`error`)."""

    status: int = Field(description=_ITEM_STATUS.format(ok=201))
    transaction_id: str
    result: SendResult | None
    error: ErrorBody | None


class SendBatchResult(BaseModel):
    """The outcome of every message of a batch send, in request order.

    201 when every item is durable, 207 when some are not (each item says which); a batch
    none of whose items is durable is answered as a single send would be (503, 413).
    """

    results: list[SendBatchItem]


class OpResult(BaseModel):
    """An op record durable in the op topic."""

    transaction_id: str
    op: OPS
    op_id: str
    stored_at: str = Field(description="the broker's LogAppendTime, RFC 3339 UTC")


class OpBatchItem(BaseModel):
    """One op of a batch: durable (`result`) or not (`error`)."""

    status: int = Field(description=_ITEM_STATUS.format(ok=202))
    transaction_id: str
    op: OPS
    result: OpResult | None
    error: ErrorBody | None


class OpBatchResult(BaseModel):
    """The outcome of every op of a batch, in request order (202, or 207 when some failed)."""

    results: list[OpBatchItem]


class CheckRequest(BaseModel):
    """One check request, as the coordinator publishes it on the check topic.

    The value of coordinator/protocol/check_record.py `CheckRecord.to_value()`; check_poll.py
    decodes
    each record with that codec. A slim record adds omitted, omitted_reason, body_size and
    message_in.
    """

    model_config = ConfigDict(extra="allow")

    transaction_id: str
    msg_id: str | None
    producer_group: str
    topic: str | None
    queue_id: int | None
    body_base64: str
    keys: list[str]
    tags: str | None
    properties: dict[str, str]
    check_number: int
    prepared_at_ms: int | None
    requested_at_ms: int | None

    _json: bytes | None = PrivateAttr(default=None)

    def json_bytes(self) -> bytes:
        """Return this request as JSON, rendered once (its size counts against the mailbox
        and the answer; a body may be megabytes)."""
        if self._json is None:
            self._json = self.model_dump_json().encode()
        return self._json


class CheckRequests(BaseModel):
    """The answer of a long poll (GET /v1/check-requests): at most rest.max_answer_size
    bytes of JSON (one check alone may pass it)."""

    check_requests: list[CheckRequest]


class Health(BaseModel):
    """The answer of GET /healthz."""

    status: Literal["ok"] = "ok"


# -- consumers (consumer_routes.py) ---------------------------------------------------------

#: Messages one receive hands out at most (RocketMQ's proxy: 32 per ReceiveMessage).
MAX_RECEIVE = 32
#: Invisible durations, seconds: RocketMQ's longest is 12 hours; below a second a slow
#: client would see every message twice.
MIN_INVISIBLE_SECONDS = 1.0
MAX_INVISIBLE_SECONDS = 43_200.0
DEFAULT_RECEIVE_WAIT_SECONDS = 5.0
#: Why a receipt's ack (or change of invisible duration) did not count.
ReceiptReason = Literal["stale", "superseded", "unknown_member", "invalid_receipt"]
#: How a receive sends each message's body (once): base64 always, or UTF-8 text when it is.
BodyEncoding = Literal["base64", "text"]
_REASONS = (
    "null when it counted; `stale`: the message was acknowledged already, or its queue "
    "moved to another member (or the member was made anew) since it was handed out: it may "
    "be delivered again; `superseded`: the message was handed out again since this receipt's "
    "delivery (its invisible duration ended): only the receipt of its latest delivery "
    "counts; `unknown_member`: this member is not (or no longer) in this "
    "ingress (closed after being idle): its messages are delivered again; "
    "`invalid_receipt`: not a receipt this ingress process issued to this member of this "
    "group (altered, another member's, or from before a restart of the ingress)"
)


def _tag_expression(value: str) -> str:
    try:
        return TagFilter.parse(_utf8(value)).expression
    except ValueError as exc:
        raise PydanticCustomError(
            "invalid_tag_expression", "{problem}", {"problem": str(exc)}
        ) from None


MemberId = Annotated[
    StrictStr,
    AfterValidator(matching(fmt.GROUP_PATTERN, "a member id")),
    Field(json_schema_extra={"pattern": fmt.GROUP_PATTERN}),
]
TagExpression = Annotated[StrictStr, Field(max_length=4096), AfterValidator(_tag_expression)]
InvisibleSeconds = Annotated[
    float, Field(ge=MIN_INVISIBLE_SECONDS, le=MAX_INVISIBLE_SECONDS, allow_inf_nan=False)
]
ReceiptText = Annotated[StrictStr, Field(min_length=1, max_length=MAX_RECEIPT_LENGTH)]


class ReceiveRequest(BaseModel):
    """The body of POST /v1/consumer-groups/{group}/receive.

    The first receive of a member makes it (joins the group) with this subscription; later
    ones must name the same topic, tag expression and orderly.
    """

    model_config = _STRICT

    topic: Topic
    tag_expression: TagExpression = Field(
        default="*", description="RocketMQ's: `*`, or tags joined by `||` (`TagA || TagB`)"
    )
    max_messages: Annotated[StrictInt, Field(ge=1, le=MAX_RECEIVE)] = 16
    wait_seconds: Annotated[float, Field(ge=0, allow_inf_nan=False)] = Field(
        default=DEFAULT_RECEIVE_WAIT_SECONDS,
        description="how long to wait for the first message (at most rest.check_poll_max_wait)",
    )
    invisible_seconds: InvisibleSeconds = Field(
        default=30.0,
        description="a message not acknowledged within this time is handed out again",
    )
    orderly: StrictBool = Field(
        default=False,
        description="one message in flight per queue: the next only once this one is acked",
    )
    start_from: Literal["first", "last"] = Field(
        default="last",
        description="where a consumer group begins at its very first receive (ignored later)",
    )
    member: MemberId | None = Field(
        default=None,
        description="this client's member id; absent: one is made and answered (send it "
        "with every later call, or each call makes a new member)",
    )
    body_encoding: BodyEncoding = Field(
        default="base64",
        description="how each body is sent, once: `base64` in `body_base64`; `text` in "
        "`body` as UTF-8 text, or in `body_base64` when the body is not UTF-8",
    )


def receive_request(max_wait: float) -> type[ReceiveRequest]:
    """Return ReceiveRequest with `wait_seconds` bounded by `max_wait` (the configuration's
    rest.check_poll_max_wait), so that the OpenAPI document states the true bound."""
    wait: Any = (
        Annotated[float, Field(ge=0, le=max_wait, allow_inf_nan=False)],
        Field(
            default=min(DEFAULT_RECEIVE_WAIT_SECONDS, max_wait),
            description="how long to wait for the first message, seconds",
        ),
    )
    bounded: type[ReceiveRequest] = create_model(
        "ReceiveRequest", __base__=ReceiveRequest, __doc__=ReceiveRequest.__doc__, wait_seconds=wait
    )
    return bounded


class DeliveredMessage(BaseModel):
    """A committed message handed out to a consumer (the SDK's MessageView)."""

    topic: str
    queue_id: int
    queue_offset: int
    msg_id: str
    transaction_id: str
    producer_group: str
    body: str | None = Field(
        description="the body as UTF-8 text, with body_encoding `text` when it is UTF-8; else null"
    )
    body_base64: str | None = Field(
        description="the body, base64 (standard alphabet, padded), unless `body` holds it; "
        "exactly one of the two is set"
    )
    keys: list[str]
    tags: str | None
    properties: dict[str, str]
    prepared_at: str | None = Field(description="RFC 3339 UTC")
    committed_at: str = Field(description="RFC 3339 UTC")
    delivered_at: str = Field(description="RFC 3339 UTC: when it reached its topic table")
    delivery_attempt: int = Field(description="1, then 2, 3... when handed out again")
    receipt: str = Field(description="opaque: send it back to ack (this member only)")


class ReceiveResult(BaseModel):
    """The answer of a receive: the member's id and the messages, in queue-offset order
    within each queue; at most rest.max_answer_size bytes of JSON (one message alone may
    pass it)."""

    member: str = Field(description="the member id: send it with every later call")
    messages: list[DeliveredMessage]


class AckRequest(BaseModel):
    """The body of POST /v1/consumer-groups/{group}/ack."""

    model_config = _STRICT

    member: MemberId
    receipts: Annotated[list[ReceiptText], Field(min_length=1, max_length=MAX_BATCH)]


class ChangeInvisibleRequest(AckRequest):
    """The body of POST /v1/consumer-groups/{group}/change-invisible-duration."""

    invisible_seconds: Annotated[
        float, Field(ge=0, le=MAX_INVISIBLE_SECONDS, allow_inf_nan=False)
    ] = Field(description="hand the messages out again this many seconds from now (0: at once)")


class AckItem(BaseModel):
    """One receipt of an ack, in request order."""

    receipt: str
    acked: bool
    reason: ReceiptReason | None = Field(description=_REASONS)


class AckResult(BaseModel):
    """The outcome of every receipt of an ack."""

    results: list[AckItem]


class ChangeInvisibleItem(BaseModel):
    """One receipt of a change of invisible duration, in request order."""

    receipt: str
    changed: bool
    reason: ReceiptReason | None = Field(description=_REASONS)


class ChangeInvisibleResult(BaseModel):
    """The outcome of every receipt of a change of invisible duration."""

    results: list[ChangeInvisibleItem]
