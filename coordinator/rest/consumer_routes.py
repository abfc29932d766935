"""The consumer endpoints: receive and ack committed messages over HTTP (contract 5.5).

The same receive/ack as the SDK's SimpleConsumer, for clients that are not Python:

    POST /v1/consumer-groups/{group}/receive                    ReceiveRequest -> ReceiveResult
    POST /v1/consumer-groups/{group}/ack                        AckRequest -> AckResult
    POST /v1/consumer-groups/{group}/change-invisible-duration  -> ChangeInvisibleResult

Who may: the ingress's token rules (auth.py). A token consumes only as the consumer groups its
`[[token.consume]]` grants name, on their topics; an admin token (and open mode) as any group
on any topic: 401 without a valid token, 403 for a group or topic not granted, with the grant
to add. Consumer groups are not producer groups: a producer token consumes nothing unless
granted (RocketMQ grants Sub per topic and group apart from Pub). An ack names no topic: it
needs the group's grant, and the topic of the member it settles for, if that member is alive
(a grant of the group on other topics does not settle another token's member).

Each client keeps one member (consumers.py) by sending back the `member` of its first
answer; its receipts are good for that member only. A receive waits on the long-poll pool
and its slots (poll_slots.py), shared with the check polls, so waiting consumers never
starve sends; acks are quick and run on FastAPI's own pool.

(No `from __future__ import annotations` here: FastAPI must see the body type that
build_consumer_router makes from the configuration.)
"""

import base64
import logging
from datetime import UTC, datetime
from typing import Annotated

import anyio
from fastapi import APIRouter, Path
from pydantic import AfterValidator

from coordinator.core.config import Config
from coordinator.protocol import ingress as fmt
from coordinator.rest.auth import Principal, require_consume
from coordinator.rest.consumers import (
    ConsumersFullError,
    ConsumerUnavailableError,
    Subscription,
    SubscriptionConflictError,
)
from coordinator.rest.errors import CONSUMER_UNAVAILABLE_TEXT, ApiError
from coordinator.rest.models import (
    AckItem,
    AckRequest,
    AckResult,
    ChangeInvisibleItem,
    ChangeInvisibleRequest,
    ChangeInvisibleResult,
    DeliveredMessage,
    ReceiveRequest,
    ReceiveResult,
    matching,
    receive_request,
)
from coordinator.rest.poll_slots import PollSlotsFullError
from coordinator.rest.routes import Caller, Svc
from coordinator.rest.services import Services
from coordinator.sdk.consumer import MessageView

log = logging.getLogger(__name__)

PREFIX = "/v1/consumer-groups/{group}"

ConsumerGroupPath = Annotated[
    str,
    Path(
        description="the consumer group (GROUP_PATTERN; a namespace apart from producer groups)",
        json_schema_extra={"pattern": fmt.GROUP_PATTERN},
    ),
    AfterValidator(matching(fmt.GROUP_PATTERN, "a consumer group")),
]


def require_consumer_group(who: Principal, group: str, topic: str | None) -> None:
    """Raise a 403 ApiError unless `who` may consume as `group` on `topic` (None: some)."""
    require_consume(who, group, topic, ("group (path)", "topic"))


def _require_member_topic(svc: Services, who: Principal, group: str, member: str) -> None:
    """Raise a 403 ApiError unless `who` may consume the topic `member` of `group` reads."""
    require_consumer_group(who, group, None)
    topic = svc.consumers.topic_of(group, member)
    if topic is not None:
        require_consume(who, group, topic, ("group (path)", f"member {member!r} (its topic)"))


def _slot_key(group: str) -> str:
    """Return the key of `group`'s receives among the long-poll slots: ':' is in no group
    name, so a consumer group never shares a producer group's share."""
    return f"consumer-group:{group}"


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


def delivered(message: MessageView, receipt: str) -> DeliveredMessage:
    """Return the JSON view of one message handed out with `receipt`."""
    return DeliveredMessage(
        topic=message.topic,
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        msg_id=message.msg_id,
        transaction_id=message.transaction_id,
        producer_group=message.producer_group,
        body=_text(message.body),
        body_base64=base64.b64encode(message.body).decode("ascii"),
        keys=list(message.keys),
        tags=message.tag,
        properties=dict(message.properties),
        prepared_at=_rfc3339(message.prepared_at),
        committed_at=_rfc3339(message.committed_at) or "",
        delivered_at=_rfc3339(message.delivered_at) or "",
        delivery_attempt=message.delivery_attempt,
        receipt=receipt,
    )


def _receive(svc: Services, group: str, body: ReceiveRequest) -> ReceiveResult:
    """Receive on the calling (long-poll) thread and build the answer there too: bodies
    may be megabytes to encode, which the event loop must not do."""
    subscription = Subscription(body.topic, body.tag_expression, body.orderly)
    try:
        received = svc.consumers.receive(
            group,
            body.member,
            subscription,
            max_messages=body.max_messages,
            wait_seconds=body.wait_seconds,
            invisible_seconds=body.invisible_seconds,
            start_from=body.start_from,
        )
    except ConsumersFullError as exc:
        raise ApiError(429, "too_many_consumers", str(exc), {"Retry-After": "5"}) from exc
    except SubscriptionConflictError as exc:
        raise ApiError(409, "subscription_conflict", str(exc)) from exc
    except ConsumerUnavailableError as exc:
        log.warning("consumer group %s unavailable: %s", group, exc)
        raise ApiError(
            503, "consumer_unavailable", CONSUMER_UNAVAILABLE_TEXT, {"Retry-After": "1"}
        ) from exc
    svc.metrics.messages_delivered.inc(len(received.messages))
    return ReceiveResult(
        member=received.member,
        messages=[delivered(message, receipt) for message, receipt in received.messages],
    )


def ack(group: ConsumerGroupPath, body: AckRequest, svc: Svc, who: Caller) -> AckResult:
    """Acknowledge messages by their receipts; answer each receipt's outcome, in order.

    A receipt that does not count is `acked: false` with its reason, never an error of the
    whole call (`stale`: acknowledged already, or its queue moved on; `unknown_member`: the
    member was closed after being idle; `invalid_receipt`: not issued by this ingress
    process to this member of this group). A message not acknowledged is delivered again.
    """
    _require_member_topic(svc, who, group, body.member)
    outcomes = svc.consumers.ack(group, body.member, body.receipts)
    svc.metrics.messages_acked.inc(sum(o.done for o in outcomes))
    return AckResult(
        results=[
            AckItem(receipt=receipt, acked=o.done, reason=o.reason)
            for receipt, o in zip(body.receipts, outcomes, strict=True)
        ]
    )


def change_invisible_duration(
    group: ConsumerGroupPath, body: ChangeInvisibleRequest, svc: Svc, who: Caller
) -> ChangeInvisibleResult:
    """Hand messages out again `invisible_seconds` from now unless acknowledged before
    (0: at once); each receipt's outcome as for an ack (`changed`, `reason`)."""
    _require_member_topic(svc, who, group, body.member)
    outcomes = svc.consumers.change_invisible_duration(
        group, body.member, body.receipts, body.invisible_seconds
    )
    return ChangeInvisibleResult(
        results=[
            ChangeInvisibleItem(receipt=receipt, changed=o.done, reason=o.reason)
            for receipt, o in zip(body.receipts, outcomes, strict=True)
        ]
    )


def build_consumer_router(config: Config) -> APIRouter:
    """Return the consumer endpoints, with the longest wait from `config`."""
    router = APIRouter()
    ReceiveBody = receive_request(config.rest.check_poll_max_wait.total_seconds())  # noqa: N806

    async def receive(
        group: ConsumerGroupPath,
        body: ReceiveBody,  # type: ignore[valid-type]  # a class made from the configuration
        svc: Svc,
        who: Caller,
    ) -> ReceiveResult:
        """Receive up to `max_messages` committed messages of `topic`, waiting up to
        `wait_seconds` for the first; each is handed out again after `invisible_seconds`
        unless acknowledged (POST .../ack with its `receipt`).

        The first receive of a `member` (absent: one is made, and answered) joins the group
        with this subscription; the group's members divide the topic's queues, and each
        queue's messages come in queue-offset order. Keep calling with the same `member`: one
        not called for a while is closed and its queues go to the others. 409: the member
        reads another subscription. 429: the group holds its share of receives waiting or of
        members in this ingress (or all are taken). 503: Kafka or the warehouse failed (the
        member is made anew at the next call).
        """
        request: ReceiveRequest = body  # ReceiveBody is a ReceiveRequest
        require_consumer_group(who, group, request.topic)
        try:
            slot = svc.poll_slots.take(_slot_key(group))
        except PollSlotsFullError as exc:
            raise ApiError(
                429,
                "too_many_polls",
                f"consumer group {group!r} already has {svc.poll_slots.per_group} receives "
                "waiting (its share of this ingress's long polls), or every long-poll slot "
                "is taken; retry when one has answered",
                {"Retry-After": "1"},
            ) from exc
        try:
            return await anyio.to_thread.run_sync(
                _receive, svc, group, body, limiter=svc.poll_limiter
            )
        finally:
            slot.release()

    router.add_api_route(f"{PREFIX}/receive", receive, methods=["POST"])
    router.add_api_route(f"{PREFIX}/ack", ack, methods=["POST"])
    router.add_api_route(
        f"{PREFIX}/change-invisible-duration", change_invisible_duration, methods=["POST"]
    )
    return router
