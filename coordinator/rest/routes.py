"""The endpoints of the REST ingress (contract 5.1; the OpenAPI document at /openapi.json).

Each handler checks who may act (auth.py), turns the validated request into records
(records.py) and returns only after Kafka acknowledged them. A batch is validated and
authorised item by item before anything is written: one bad item refuses the whole batch,
naming its index. Once written, a batch is answered item by item (contract 5.1): 201/202 when
every item is durable, 207 when some are not, each item with its own status and either its
result or its error, so a client resends exactly the items that failed. A batch none of
whose items is durable gets the error a single call would get (503, 413). Sends, ops
and lookups are plain functions, run on pools of their own (pools.py): sends on the write
pool, lookups on the read pool within their token's share (`rest.max_reads_per_token`), so
a flood of reads never holds a send. The long poll runs on a pool of its own so waiting
pollers never starve sends, and renders its answer (bounded in bytes,
`rest.max_answer_size`) there, not on the event loop.

(No `from __future__ import annotations` here: FastAPI must see the parameter types that
build_router makes from the configuration.)
"""

from collections.abc import Callable, Sequence
from typing import Annotated, cast

import anyio
from deltalake.exceptions import DeltaError
from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AfterValidator
from starlette.convertors import PathConvertor, register_url_convertor

from coordinator.core.config import Config
from coordinator.core.topics import group_topic_problem
from coordinator.protocol import ingress as fmt
from coordinator.protocol.records import operator_label
from coordinator.rest.answers import check_answer, item_budget, json_response
from coordinator.rest.auth import (
    OPEN_MODE,
    Principal,
    require_admin,
    require_group,
    require_metrics,
)
from coordinator.rest.errors import ApiError, printable, write_failure
from coordinator.rest.gate import principal_of
from coordinator.rest.in_flight import holder_of
from coordinator.rest.instance_ids import bound_instance, bound_properties
from coordinator.rest.kafka_writer import Stored, WriteFailure
from coordinator.rest.metrics import CONTENT_TYPE
from coordinator.rest.models import (
    OPS,
    CheckRequests,
    ErrorBody,
    Health,
    OpBatchItem,
    OpBatchRequest,
    OpBatchResult,
    OpRequest,
    OpResult,
    SendBatchItem,
    SendBatchRequest,
    SendBatchResult,
    SendRequest,
    SendResult,
    matching,
)
from coordinator.rest.poll_slots import PollSlotsFullError
from coordinator.rest.pools import reading, writing
from coordinator.rest.records import half_record, new_transaction_id, op_record, rfc3339
from coordinator.rest.services import Services
from delta_tables.lookup import TransactionState

#: A batch of which some items are durable and some are not (WebDAV's Multi-Status).
MULTI_STATUS = 207
_PARTLY = "Some items are durable, some are not: each item's status, result or error says"
DEFAULT_WAIT_SECONDS = 10.0

_bearer = HTTPBearer(auto_error=False, description="A token of the auth file (rest.auth_file)")


# Both async: FastAPI runs a sync dependency on anyio's thread pool, and a send would wait
# for a thread of it before its own pool's (pools.py).
async def _services(request: Request) -> Services:
    return cast(Services, request.app.state.services)


async def _caller(
    request: Request,
    _documented: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    # The gate (gate.py) authenticated the caller before the body was read; the bearer
    # dependency above only documents the scheme in the OpenAPI document.
    return principal_of(request.scope)


Svc = Annotated[Services, Depends(_services)]
Caller = Annotated[Principal, Depends(_caller)]
TransactionIdPath = Annotated[
    str,
    Path(
        description="percent-encode '/', '?', '#'",
        json_schema_extra={"pattern": fmt.TRANSACTION_ID_PATTERN},
    ),
    AfterValidator(matching(fmt.TRANSACTION_ID_PATTERN, "a transaction id")),
]
ProducerGroupQuery = Annotated[
    str,
    Query(json_schema_extra={"pattern": fmt.GROUP_PATTERN}),
    AfterValidator(matching(fmt.GROUP_PATTERN, "a producer group")),
]
ProducerInstanceQuery = Annotated[
    str | None,
    Query(
        description=(
            "this producer instance's id, as its halves carry it (property "
            f"`{fmt.PRODUCER_INSTANCE_PROPERTY}`): the checks of those halves come to this "
            "poll first; behind an auth file only to a poll with the same token"
        ),
        json_schema_extra={"pattern": fmt.PRODUCER_INSTANCE_PATTERN},
    ),
    AfterValidator(matching(fmt.PRODUCER_INSTANCE_PATTERN, "a producer instance id")),
]


class _AnyPath(PathConvertor):
    """Starlette's `path` without its blind spot: `.*` stops at a newline, so an id with one
    would be 'no such endpoint'; this matches it, and TransactionIdPath refuses it by name."""

    regex = "(?s:.*)"


#: The convertor of {transaction_id:any_path} in the routes below.
ANY_PATH = "any_path"


def _max_immunity(svc: Services) -> int:
    return int(svc.config.max_check_immunity.total_seconds())


def _sent(transaction_id: str, stored: Stored) -> SendResult:
    return SendResult(
        transaction_id=transaction_id,
        msg_id=fmt.msg_id_of(stored.partition, stored.offset),
        stored_at=rfc3339(stored.timestamp_ms),
        partition=stored.partition,
        offset=stored.offset,
    )


def _op_done(transaction_id: str, op: str, stored: Stored) -> OpResult:
    return OpResult(
        transaction_id=transaction_id,
        op=cast(OPS, op),
        op_id=fmt.op_id_of(stored.partition, stored.offset),
        stored_at=rfc3339(stored.timestamp_ms),
    )


def _may_act(svc: Services, who: Principal, group: str, what: str) -> None:
    """Raise a 4xx ApiError unless `who` may act for `group` and the layout can carry it
    (in the per-group layout a group's records and checks have topics of its own)."""
    require_group(who, group, what)
    layout = svc.config.kafka.layout
    if layout.per_group and (problem := group_topic_problem(group, layout)):
        raise ApiError(422, "invalid_request", f"{what}: {problem}")


def _authorize_op(svc: Services, who: Principal, request: OpRequest, field: str = "") -> None:
    _may_act(svc, who, request.producer_group, f"{field}producer_group")
    if request.operator is not None:
        require_admin(who, f"{field}operator (an operator's op)")


def _as_operator(who: Principal, request: OpRequest) -> OpRequest:
    """Return `request` with the recorded operator: the admin token's name, then `operator`.

    With an auth file the "who" of an operator's op is the authenticated token, and the
    request's `operator` at most a display name beside it (coordinator/protocol/records.py).
    """
    if request.operator is None or who is OPEN_MODE:
        return request
    return request.model_copy(update={"operator": operator_label(who.name, request.operator)})


def _bound(who: Principal, message: SendRequest) -> SendRequest:
    """Return `message` with the producer instance it names bound to the caller's token
    (instance_ids.py): only that token's polls get its checks first."""
    properties = bound_properties(who, message.properties)
    if properties == message.properties:
        return message
    return message.model_copy(update={"properties": properties})


def send_half(body: SendRequest, svc: Svc, who: Caller) -> SendResult:
    """Store one half message; answer once it is durable in the half topic."""
    _may_act(svc, who, body.producer_group, "producer_group")
    transaction_id = body.transaction_id or new_transaction_id()
    record = half_record(
        _bound(who, body),
        transaction_id,
        svc.config.max_message_size,
        svc.clock(),
        max_immunity=_max_immunity(svc),
        allowed_topics=svc.config.allowed_topics,
    )
    svc.topic_limits.admit([("", body.producer_group, body.topic)])
    stored = svc.writer.send_half(record)
    svc.metrics.records.labels("half").inc()
    return _sent(transaction_id, stored)


def send_halves(
    body: SendBatchRequest, svc: Svc, who: Caller, response: Response
) -> SendBatchResult:
    """Store several half messages; all are checked before any is written."""
    received = svc.clock()
    ids, records = [], []
    for index, message in enumerate(body.messages):
        field = f"messages[{index}]."
        _may_act(svc, who, message.producer_group, f"{field}producer_group")
        transaction_id = message.transaction_id or new_transaction_id()
        ids.append(transaction_id)
        records.append(
            half_record(
                _bound(who, message),
                transaction_id,
                svc.config.max_message_size,
                received,
                field,
                max_immunity=_max_immunity(svc),
                allowed_topics=svc.config.allowed_topics,
            )
        )
    svc.topic_limits.admit(
        [(f"messages[{i}].", m.producer_group, m.topic) for i, m in enumerate(body.messages)]
    )
    outcomes = svc.writer.send_halves(records)
    items = []
    for transaction_id, outcome in zip(ids, outcomes, strict=True):
        if isinstance(outcome, Stored):
            done = _sent(transaction_id, outcome)
            items.append(
                SendBatchItem(status=201, transaction_id=transaction_id, result=done, error=None)
            )
        else:
            status, error = _item_error(outcome)
            items.append(
                SendBatchItem(
                    status=status, transaction_id=transaction_id, result=None, error=error
                )
            )
    _answer_batch(response, outcomes, svc, "half")
    return SendBatchResult(results=items)


def _item_error(failure: WriteFailure) -> tuple[int, ErrorBody]:
    status, code = write_failure(failure)
    return status, ErrorBody(error=code, message=printable(str(failure)))


def _answer_batch(
    response: Response, outcomes: Sequence[Stored | WriteFailure], svc: Services, kind: str
) -> None:
    """Count the durable records and set the batch's status; raise if none is durable."""
    durable = sum(isinstance(outcome, Stored) for outcome in outcomes)
    svc.metrics.records.labels(kind).inc(durable)
    if durable == 0:
        failure = next(o for o in outcomes if not isinstance(o, Stored))
        raise failure  # nothing acknowledged: the single call's answer (errors.py)
    if durable < len(outcomes):
        response.status_code = MULTI_STATUS


def _op_handler(op: str) -> Callable[..., OpResult]:
    def send_op(
        transaction_id: TransactionIdPath, body: OpRequest, svc: Svc, who: Caller
    ) -> OpResult:
        _authorize_op(svc, who, body)
        request = _as_operator(who, body)
        stored = svc.writer.send_op(op_record(transaction_id, op, request, svc.clock()))
        svc.metrics.records.labels("op").inc()
        return _op_done(transaction_id, op, stored)

    send_op.__name__ = f"send_{op.lower()}"
    send_op.__doc__ = f"Record a {op} op for the transaction; answer once it is durable."
    return send_op


def send_ops(body: OpBatchRequest, svc: Svc, who: Caller, response: Response) -> OpBatchResult:
    """Record several ops; all are checked before any is written."""
    received = svc.clock()
    for index, item in enumerate(body.ops):
        _authorize_op(svc, who, item, f"ops[{index}].")
    records = [
        op_record(item.transaction_id, item.op, _as_operator(who, item), received)
        for item in body.ops
    ]
    outcomes = svc.writer.send_ops(records)
    items = []
    for item, outcome in zip(body.ops, outcomes, strict=True):
        if isinstance(outcome, Stored):
            done = _op_done(item.transaction_id, item.op, outcome)
            items.append(
                OpBatchItem(
                    status=202,
                    transaction_id=item.transaction_id,
                    op=item.op,
                    result=done,
                    error=None,
                )
            )
        else:
            status, error = _item_error(outcome)
            items.append(
                OpBatchItem(
                    status=status,
                    transaction_id=item.transaction_id,
                    op=item.op,
                    result=None,
                    error=error,
                )
            )
    _answer_batch(response, outcomes, svc, "op")
    return OpBatchResult(results=items)


def get_transaction(
    transaction_id: TransactionIdPath,
    svc: Svc,
    who: Caller,
    producer_group: Annotated[
        ProducerGroupQuery | None, Query(description="implied by a group token")
    ] = None,
) -> TransactionState:
    """Return the state of the group's transaction `transaction_id` (contract 3: the pair is
    the key).

    Whether the caller may ask is decided before any lookup, and a lookup sees only the
    group's own rows: another group's id answers exactly as an id nobody has (404).
    """
    group = producer_group if producer_group is not None else who.group
    if group is not None:
        require_group(who, group, "producer_group")
    elif not who.admin:  # a consume-only token: no group of its own to read
        raise ApiError(
            403, "forbidden", "producer_group (query): this token acts for no producer group"
        )
    try:
        if group is None:  # an admin who named no group: fine while the id has one owner
            owners = svc.lookup.producer_groups(transaction_id)
            if len(owners) > 1:
                raise ApiError(
                    400,
                    "invalid_request",
                    f"producer_group (query): transaction {transaction_id!r} exists in "
                    f"{len(owners)} producer groups ({', '.join(sorted(owners))}); name one",
                )
            group = next(iter(owners), None)
        state = svc.lookup.state(transaction_id, group) if group is not None else None
    except (OSError, DeltaError) as exc:
        message = f"the warehouse cannot be read: {exc}"
        raise ApiError(503, "warehouse_unavailable", message) from exc
    if state is None:
        raise ApiError(
            404,
            "not_found",
            f"transaction {transaction_id!r} is unknown (never sent, or not ingested yet)",
        )
    return state


def _poll_checks(
    svc: Services,
    producer_group: str,
    max_records: int,
    wait_seconds: float,
    producer_instance: str | None,
) -> tuple[int, bytes]:
    """Long-poll on the calling (long-poll) thread, and render the answer there too: each
    check carries its body, megabytes maybe, which the event loop must not encode."""
    found = svc.poller.poll(
        producer_group,
        max_records,
        wait_seconds,
        producer_instance,
        max_bytes=item_budget(svc.config.rest.max_answer_size, max_records),
    )
    return len(found), check_answer(found)


def health() -> Health:
    """Answer that the process is up."""
    return Health()


def metrics(svc: Svc, request: Request) -> Response:
    """Return the Prometheus metrics of this process (with `rest.metrics_token_required`,
    to a token with the `metrics` right or an admin's)."""
    if svc.config.rest.metrics_token_required:
        require_metrics(principal_of(request.scope))
    return Response(svc.metrics.render(), media_type=CONTENT_TYPE)


def build_router(config: Config) -> APIRouter:
    """Return every endpoint, with the bounds that come from `config`."""
    register_url_convertor(ANY_PATH, _AnyPath())
    router = APIRouter()
    max_wait = config.rest.check_poll_max_wait.total_seconds()

    async def check_requests(  # FastAPI passes parameters by name
        svc: Svc,
        who: Caller,
        producer_group: ProducerGroupQuery,
        *,
        max_records: Annotated[int, Query(alias="max", ge=1, le=500)] = 100,
        wait_seconds: Annotated[float, Query(ge=0, le=max_wait, allow_inf_nan=False)] = min(
            DEFAULT_WAIT_SECONDS, max_wait
        ),
        producer_instance: ProducerInstanceQuery = None,
    ) -> Response:
        """Long-poll the group's check requests: answer as soon as any, or after the wait.

        A group, and a token (its check polls and receives together), holds at most its
        share of the long-poll slots (poll_slots.py); past it, or with every slot taken, the
        answer is 429 at once, never a place in a queue. A check
        of a half that named its producer instance goes to that instance's polls first, to
        any poll of the group after `rest.check_sender_first`; behind an auth file an
        instance is the token's own (instance_ids.py). The answer is at most
        `rest.max_answer_size` bytes (one check alone may pass it): the rest waits.
        """
        _may_act(svc, who, producer_group, "producer_group")
        try:
            slot = svc.poll_slots.take(producer_group, holder_of(who))
        except PollSlotsFullError as exc:
            raise ApiError(429, "too_many_polls", str(exc), {"Retry-After": "1"}) from exc
        try:
            count, answer = await anyio.to_thread.run_sync(
                _poll_checks,
                svc,
                producer_group,
                max_records,
                wait_seconds,
                None if producer_instance is None else bound_instance(who, producer_instance),
                limiter=svc.poll_limiter,
            )
        finally:
            slot.release()
        svc.metrics.checks_delivered.inc(count)
        return json_response(answer)

    router.add_api_route("/v1/transactions", writing(send_half), methods=["POST"], status_code=201)
    router.add_api_route(
        "/v1/transactions/batch",
        writing(send_halves),
        methods=["POST"],
        status_code=201,
        responses={MULTI_STATUS: {"model": SendBatchResult, "description": _PARTLY}},
    )
    for op in fmt.OPS:
        router.add_api_route(
            f"/v1/transactions/{{transaction_id:{ANY_PATH}}}/{op.lower()}",
            writing(_op_handler(op)),
            methods=["POST"],
            status_code=202,
        )
    router.add_api_route(
        "/v1/ops/batch",
        writing(send_ops),
        methods=["POST"],
        status_code=202,
        responses={MULTI_STATUS: {"model": OpBatchResult, "description": _PARTLY}},
    )
    router.add_api_route(
        f"/v1/transactions/{{transaction_id:{ANY_PATH}}}",
        reading("producer group", "producer_group")(get_transaction),
        methods=["GET"],
    )
    router.add_api_route(
        "/v1/check-requests",
        check_requests,
        methods=["GET"],
        response_model=CheckRequests,  # rendered by _poll_checks (answers.py)
    )
    router.add_api_route("/healthz", health, methods=["GET"])
    router.add_api_route(
        "/metrics",
        metrics,
        methods=["GET"],
        response_class=PlainTextResponse,
        responses={200: {"description": "Prometheus text format"}},
    )
    return router
