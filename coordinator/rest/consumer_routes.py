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
answer; its receipts are good for that member, and that delivery, only. A receive waits on
the long-poll pool and its slots (poll_slots.py), shared with the check polls, so waiting
consumers never starve sends; a token's receives and check polls share one share of the
slots, and its members one share of the members (consumers.py). Acks and changes of
invisible duration run on the read pool (pools.py), at most `rest.max_reads_per_token` of
one token at once: an ack waits for its member while a receive reads, and must not hold a
thread another token's call needs.

Answers are bounded in bytes (`rest.max_answer_size`; a body comes once, as `body_encoding`
asks) and rendered as JSON bytes on the thread that made them (answers.py), never on the
event loop.

(No `from __future__ import annotations` here: FastAPI must see the body type that
build_consumer_router makes from the configuration.)
"""

import logging
from functools import partial
from typing import Annotated

import anyio
from fastapi import APIRouter, Path, Response
from pydantic import AfterValidator

from coordinator.core.config import Config
from coordinator.core.topics import consumer_group_topic_problem
from coordinator.protocol import ingress as fmt
from coordinator.rest.answers import (
    item_budget,
    json_response,
    message_json,
    model_response,
    receive_answer,
)
from coordinator.rest.auth import Principal, require_consume
from coordinator.rest.consumers import (
    ConsumersFullError,
    ConsumerUnavailableError,
    Subscription,
    SubscriptionConflictError,
    UnackedLimitError,
)
from coordinator.rest.errors import CONSUMER_UNAVAILABLE_TEXT, ApiError
from coordinator.rest.in_flight import holder_of
from coordinator.rest.models import (
    AckItem,
    AckRequest,
    AckResult,
    ChangeInvisibleItem,
    ChangeInvisibleRequest,
    ChangeInvisibleResult,
    ReceiveRequest,
    ReceiveResult,
    matching,
    receive_request,
)
from coordinator.rest.poll_slots import PollSlotsFullError
from coordinator.rest.pools import reading
from coordinator.rest.routes import Caller, Svc
from coordinator.rest.services import Services

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


def _receive(svc: Services, group: str, body: ReceiveRequest, who: Principal) -> Response:
    """Receive on the calling (long-poll) thread and render the answer there too: bodies
    may be megabytes to encode, which the event loop must not do. Each message is rendered
    as it is taken, and taken only if it fits the answer's bytes."""
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
            max_bytes=item_budget(svc.config.rest.max_answer_size, body.max_messages),
            render=partial(message_json, encoding=body.body_encoding),
            holder=holder_of(who),
        )
    except ConsumersFullError as exc:
        raise ApiError(429, "too_many_consumers", str(exc), {"Retry-After": "5"}) from exc
    except UnackedLimitError as exc:
        raise ApiError(429, "too_many_unacked", str(exc), {"Retry-After": "1"}) from exc
    except SubscriptionConflictError as exc:
        raise ApiError(409, "subscription_conflict", str(exc)) from exc
    except ConsumerUnavailableError as exc:
        log.warning("consumer group %s unavailable: %s", group, exc)
        raise ApiError(
            503, "consumer_unavailable", CONSUMER_UNAVAILABLE_TEXT, {"Retry-After": "1"}
        ) from exc
    svc.metrics.messages_delivered.inc(len(received.messages))
    return json_response(
        receive_answer(
            received.member,
            (
                d.rendered
                if d.rendered is not None
                else message_json(d.message, d.receipt, body.body_encoding)
                for d in received.messages
            ),
        )
    )


def ack(group: ConsumerGroupPath, body: AckRequest, svc: Svc, who: Caller) -> Response:
    """Acknowledge messages by their receipts; answer each receipt's outcome, in order.

    A receipt that does not count is `acked: false` with its reason, never an error of the
    whole call (`stale`: acknowledged already, or its queue moved on; `superseded`: handed
    out again since: only its latest delivery's receipt counts; `unknown_member`: the
    member was closed after being idle; `invalid_receipt`: not issued by this ingress
    process to this member of this group). A message not acknowledged is delivered again.
    """
    _require_member_topic(svc, who, group, body.member)
    outcomes = svc.consumers.ack(group, body.member, body.receipts)
    svc.metrics.messages_acked.inc(sum(o.done for o in outcomes))
    # Rendered on this (pool) thread: a thousand receipts echoed are megabytes.
    return model_response(
        AckResult(
            results=[
                AckItem(receipt=receipt, acked=o.done, reason=o.reason)
                for receipt, o in zip(body.receipts, outcomes, strict=True)
            ]
        )
    )


def change_invisible_duration(
    group: ConsumerGroupPath, body: ChangeInvisibleRequest, svc: Svc, who: Caller
) -> Response:
    """Hand messages out again `invisible_seconds` from now unless acknowledged before
    (0: at once); each receipt's outcome as for an ack (`changed`, `reason`)."""
    _require_member_topic(svc, who, group, body.member)
    outcomes = svc.consumers.change_invisible_duration(
        group, body.member, body.receipts, body.invisible_seconds
    )
    return model_response(
        ChangeInvisibleResult(
            results=[
                ChangeInvisibleItem(receipt=receipt, changed=o.done, reason=o.reason)
                for receipt, o in zip(body.receipts, outcomes, strict=True)
            ]
        )
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
    ) -> Response:
        """Receive up to `max_messages` committed messages of `topic`, waiting up to
        `wait_seconds` for the first; each is handed out again after `invisible_seconds`
        unless acknowledged (POST .../ack with its `receipt`).

        The first receive of a `member` (absent: one is made, and answered) joins the group
        with this subscription; the group's members divide the topic's queues, and each
        queue's messages come in queue-offset order. Keep calling with the same `member`: one
        not called for a while is closed and its queues go to the others. The answer is at
        most `rest.max_answer_size` bytes (one message alone may pass it); each body comes
        once, as `body_encoding` asks. 409: the member reads another subscription. 429: the
        group or the token holds its share of long polls waiting (receives and check polls)
        or of members in this ingress (or all are taken), or the member holds as many
        unacknowledged messages as it may (`too_many_unacked`: ack some). 422: in the
        per-group topic layout, a group too long for an offsets topic of its own. 503: Kafka
        or the warehouse failed (the member is made anew at the next call).
        """
        request: ReceiveRequest = body  # ReceiveBody is a ReceiveRequest
        require_consumer_group(who, group, request.topic)
        # Only a receive makes a member: a group no offsets topic can name has none to ack.
        layout = svc.config.kafka.layout
        if layout.per_group and (problem := consumer_group_topic_problem(group, layout)):
            raise ApiError(422, "invalid_request", f"group (path): {problem}")
        try:
            slot = svc.poll_slots.take(
                _slot_key(group), holder_of(who), label=f"consumer group {group!r}"
            )
        except PollSlotsFullError as exc:
            raise ApiError(429, "too_many_polls", str(exc), {"Retry-After": "1"}) from exc
        try:
            return await anyio.to_thread.run_sync(
                _receive, svc, group, body, who, limiter=svc.poll_limiter
            )
        finally:
            slot.release()

    # The answers are rendered by the routes (answers.py); the models document them.
    router.add_api_route(
        f"{PREFIX}/receive", receive, methods=["POST"], response_model=ReceiveResult
    )
    read = reading("consumer group", "group")
    router.add_api_route(f"{PREFIX}/ack", read(ack), methods=["POST"], response_model=AckResult)
    router.add_api_route(
        f"{PREFIX}/change-invisible-duration",
        read(change_invisible_duration),
        methods=["POST"],
        response_model=ChangeInvisibleResult,
    )
    return router
