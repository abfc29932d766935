"""A RocketMQ message <-> txcoord's half and check request (pure; the mapping of
docs/contract.md, "The RocketMQ 5 endpoint").

    RocketMQ (apache.rocketmq.v2.Message)    txcoord
    system_properties.message_id              the transaction id (and the id a check-back
                                              names): a client's retry of one message is the
                                              same transaction
    topic.name                                topic
    system_properties.keys / tag              keys / tags
    user_properties                           properties
    body (IDENTITY, or GZIP: inflated)        body, at most max_message_size
    born_timestamp / born_host                properties txcoord.born_timestamp (epoch ms) and
                                              txcoord.born_host (txcoord.born_at is the
                                              endpoint's receive time, as over REST)
    orphaned_transaction_recovery_duration    check_immunity_seconds (rounded up; at most
                                              max_check_immunity)
    the client id (x-mq-client-id)            txcoord.producer_instance: its checks reach the
                                              sender's Telemetry stream first
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import zlib
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as service

from coordinator.protocol import ingress as fmt
from coordinator.rest.models import CheckRequest, SendRequest
from coordinator.rocketmq.codes import Code, RefusedError
from coordinator.sdk.consumer import MessageView

__all__ = [
    "check_command",
    "delivered_message",
    "describe_queue",
    "half_request",
    "instance_of",
]

#: Properties of a half that RocketMQ carries as system properties: set here, never by a client.
BORN_TIMESTAMP = "txcoord.born_timestamp"
BORN_HOST = "txcoord.born_host"
#: What the endpoint writes into a half itself; a check-back shows none of them.
_OWN_PROPERTIES = (BORN_TIMESTAMP, BORN_HOST, fmt.PRODUCER_INSTANCE_PROPERTY)
#: Longest born host kept (an address; RocketMQ sends "ip" or "ip:port").
_MAX_BORN_HOST = 255


def describe_queue(into: pb.MessageQueue, topic: str, queue_id: int, endpoints: Any) -> None:
    """Fill `into` with queue `queue_id` of `topic` as every answer describes it (QueryRoute's
    and QueryAssignment's alike: a push consumer compares them across answers, so they must
    never vary): one broker, this endpoint at `endpoints`, transactional messages only."""
    into.topic.name = topic
    into.id = queue_id
    into.permission = pb.Permission.READ_WRITE
    into.broker.name = "txcoord"
    into.broker.id = 0
    into.broker.endpoints.CopyFrom(endpoints)
    into.accept_message_types.append(pb.MessageType.TRANSACTION)


def instance_of(client_id: str) -> str:
    """Return the producer instance id of a RocketMQ client id (`host@pid@index@time` has
    an `@`, which an instance id may not: a digest of it, always the same)."""
    return "rmq-" + hashlib.sha256(client_id.encode("utf-8", "surrogateescape")).hexdigest()[:40]


def _body(message: pb.Message, max_message_size: int) -> bytes:
    """Return the message's body, inflated if GZIP; refuse one larger than allowed."""
    encoding = message.system_properties.body_encoding
    body: bytes = message.body
    if encoding == pb.Encoding.GZIP:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            # At most one byte past the limit: a GZIP bomb inflates no further.
            body = inflater.decompress(message.body, max_message_size + 1)
        except zlib.error as exc:
            raise RefusedError(Code.MESSAGE_CORRUPTED, f"body: not valid GZIP ({exc})") from None
        if not inflater.eof and len(body) <= max_message_size:
            raise RefusedError(Code.MESSAGE_CORRUPTED, "body: truncated GZIP")
    elif encoding not in (pb.Encoding.IDENTITY, pb.Encoding.ENCODING_UNSPECIFIED):
        raise RefusedError(Code.BAD_REQUEST, f"body_encoding {encoding} is not IDENTITY or GZIP")
    if len(body) > max_message_size:
        size = "inflated, more" if encoding == pb.Encoding.GZIP else f"{len(body)} bytes, more"
        raise RefusedError(
            Code.MESSAGE_BODY_TOO_LARGE,
            f"body: {size} than max_message_size ({max_message_size} bytes)",
        )
    if not body:
        raise RefusedError(Code.MESSAGE_BODY_EMPTY, "body: a message needs a body")
    return body


def _immunity(message: pb.Message) -> int | None:
    """Return the check immunity of the message in whole seconds (rounded up), or None."""
    props = message.system_properties
    if not props.HasField("orphaned_transaction_recovery_duration"):
        return None
    duration = props.orphaned_transaction_recovery_duration
    if duration.seconds < 0 or duration.nanos < 0:
        raise RefusedError(
            Code.BAD_REQUEST, "orphaned_transaction_recovery_duration must not be negative"
        )
    seconds = duration.seconds + (1 if duration.nanos else 0)
    return seconds or None


def half_request(
    message: pb.Message, producer_group: str, instance: str, max_message_size: int
) -> SendRequest:
    """Return the REST ingress's request for the half `message` of `producer_group`, sent
    by producer instance `instance`; raise RefusedError for what cannot be one."""
    props = message.system_properties
    if props.message_type != pb.MessageType.TRANSACTION:
        kind = pb.MessageType.Name(props.message_type)
        raise RefusedError(
            Code.UNSUPPORTED,
            f"message_type {kind}: this endpoint stores transactional messages only "
            "(docs/rocketmq.md)",
        )
    if props.HasField("message_group") or props.HasField("delivery_timestamp"):
        raise RefusedError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            "a transactional message has no message_group and no delivery_timestamp",
        )
    if message.topic.resource_namespace:
        raise RefusedError(Code.UNSUPPORTED, "resource namespaces are not supported")
    if not props.message_id:
        raise RefusedError(Code.ILLEGAL_MESSAGE_ID, "system_properties.message_id is required")
    body = _body(message, max_message_size)
    properties = {
        name: value
        for name, value in message.user_properties.items()
        if name not in _OWN_PROPERTIES
    }
    properties[fmt.PRODUCER_INSTANCE_PROPERTY] = instance
    if props.HasField("born_timestamp"):
        born = props.born_timestamp
        properties[BORN_TIMESTAMP] = str(born.seconds * 1000 + born.nanos // 1_000_000)
    if props.born_host:
        properties[BORN_HOST] = props.born_host[:_MAX_BORN_HOST]
    raw = {
        "producer_group": producer_group,
        "topic": message.topic.name,
        "body_base64": base64.b64encode(body).decode(),
        "keys": list(props.keys) or None,
        "tags": props.tag if props.HasField("tag") else None,
        "properties": properties,
        "transaction_id": props.message_id,
        "check_immunity_seconds": _immunity(message),
    }
    try:
        return SendRequest.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'message'}: {error['msg']}"
            for error in exc.errors()
        )
        raise RefusedError(_code_of_field(exc), problems) from None


def _code_of_field(exc: ValidationError) -> int:
    """Return the Code of the first field a half was refused for."""
    field = str(exc.errors()[0]["loc"][0]) if exc.errors() and exc.errors()[0]["loc"] else ""
    return int(
        {
            "topic": Code.ILLEGAL_TOPIC,
            "keys": Code.ILLEGAL_MESSAGE_KEY,
            "tags": Code.ILLEGAL_MESSAGE_TAG,
            "properties": Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
            "transaction_id": Code.ILLEGAL_MESSAGE_ID,
        }.get(field, Code.BAD_REQUEST)
    )


def _millis(timestamp_ms: int | None, into: Any) -> None:
    """Set protobuf Timestamp `into` to `timestamp_ms` (epoch ms), if known."""
    if timestamp_ms is not None:
        into.FromMilliseconds(timestamp_ms)


def check_command(check: CheckRequest) -> service.TelemetryCommand:
    """Return the check-back (RecoverOrphanedTransactionCommand) of one check request: the
    half as RocketMQ's broker hands it to the producer's TransactionChecker."""
    properties: Mapping[str, str] = check.properties
    message = pb.Message(body=_decoded(check.body_base64))
    message.topic.name = check.topic or ""
    message.user_properties.update(
        {name: value for name, value in properties.items() if name not in _OWN_PROPERTIES}
    )
    system = message.system_properties
    system.message_id = check.transaction_id
    system.message_type = pb.MessageType.TRANSACTION
    system.body_encoding = pb.Encoding.IDENTITY
    system.keys.extend(check.keys)
    if check.tags is not None:
        system.tag = check.tags
    if check.queue_id is not None:
        system.queue_id = check.queue_id
    born = properties.get(BORN_TIMESTAMP, "")
    born_ms = int(born) if born.isdigit() else check.prepared_at_ms
    _millis(born_ms, system.born_timestamp)
    system.born_host = properties.get(BORN_HOST, "")
    _millis(check.prepared_at_ms, system.store_timestamp)
    # Which check this is (1, 2, ...): RocketMQ counts a half's checks in
    # TRANSACTION_CHECK_TIMES; the closest field a client reads is the delivery attempt.
    system.delivery_attempt = check.check_number
    command = service.TelemetryCommand()
    command.recover_orphaned_transaction_command.message.CopyFrom(message)
    command.recover_orphaned_transaction_command.transaction_id = check.transaction_id
    return command


def _decoded(body_base64: str) -> bytes:
    try:
        return base64.b64decode(body_base64, validate=True)
    except (binascii.Error, ValueError):
        return b""


def delivered_message(view: MessageView, receipt: str, invisible_seconds: float) -> pb.Message:
    """Return a committed message as a RocketMQ consumer receives it: the half's fields (as
    `check_command` shows them), its queue and queue offset, the receipt handle to ack it
    with, its delivery attempt, and its commit time as the store time."""
    message = pb.Message(body=view.body)
    message.topic.name = view.topic
    message.user_properties.update(
        {name: value for name, value in view.properties.items() if name not in _OWN_PROPERTIES}
    )
    system = message.system_properties
    system.message_id = view.transaction_id
    system.message_type = pb.MessageType.TRANSACTION
    system.body_encoding = pb.Encoding.IDENTITY
    system.keys.extend(view.keys)
    if view.tag is not None:
        system.tag = view.tag
    system.queue_id = view.queue_id
    system.queue_offset = view.queue_offset
    system.receipt_handle = receipt
    system.delivery_attempt = view.delivery_attempt
    born = view.properties.get(BORN_TIMESTAMP, "")
    prepared = view.prepared_at or view.committed_at
    _millis(
        int(born) if born.isdigit() else int(prepared.timestamp() * 1000), system.born_timestamp
    )
    system.born_host = view.properties.get(BORN_HOST, "")
    _millis(int(view.committed_at.timestamp() * 1000), system.store_timestamp)
    system.invisible_duration.FromMilliseconds(int(invisible_seconds * 1000))
    return message
