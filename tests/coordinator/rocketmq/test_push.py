"""A push consumer's calls without a stack (coordinator/rocketmq/push.py, consumers.py): the
Settings it is answered, its QueryAssignment (its member's queues of the topic, joining the
group first), its ReceiveMessage (the named queue only) and its termination (its members
leave their group). The consumer members are a fake of coordinator/rest/consumers.py's."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as service

from coordinator.core.config import Config
from coordinator.rest.auth import ConsumeGrant, Principal
from coordinator.rest.consumers import Received
from coordinator.rest.poll_slots import PollSlots
from coordinator.rocketmq import consumers
from coordinator.rocketmq.codes import Code
from coordinator.rocketmq.consumers import ConsumerCalls, member_of
from coordinator.rocketmq.credentials import CLIENT_ID
from coordinator.rocketmq.push import (
    MAX_ATTEMPTS,
    RECEIVE_BATCH_SIZE,
    PushClients,
    assignment_response,
    is_push,
    push_settings,
)

READER = Principal(
    group=None, admin=False, name="reader", consume=(ConsumeGrant("readers", frozenset("*")),)
)
TOPIC = "Orders"


class FakeMembers:
    """Consumer members whose queues the test deals: each receive is recorded."""

    def __init__(self) -> None:
        self.queues: dict[str, list[tuple[str, int]]] = {}
        self.receives: list[dict[str, Any]] = []
        self.left: list[tuple[str, str]] = []
        #: Receives before a new member is dealt its queues (the group's join).
        self.joins_after = 2

    def receive(self, group: str, member: str | None, subscription: Any, **kw: Any) -> Received:
        assert member is not None
        self.receives.append({"group": group, "member": member, "tags": subscription.tags, **kw})
        self.joins_after -= 1
        return Received(member, [])

    def assigned(self, group: str, member: str) -> list[tuple[str, int]] | None:
        return self.queues.get(member) if self.joins_after <= 0 else []

    def leave(self, group: str, member: str) -> bool:
        self.left.append((group, member))
        return True


class Context:
    """A gRPC call's context: the client id is all the calls read of it."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return [(CLIENT_ID, self.client_id)]


def calls(members: FakeMembers) -> ConsumerCalls:
    services = SimpleNamespace(
        config=Config(),
        consumers=members,
        poll_slots=PollSlots(),
        metrics=SimpleNamespace(messages_delivered=SimpleNamespace(inc=lambda n: None)),
    )
    credentials = SimpleNamespace(authenticate=lambda metadata: READER)
    return ConsumerCalls(services, credentials, streams=None)


def query(topic: str = TOPIC) -> Any:
    request = service.QueryAssignmentRequest()
    request.topic.name, request.group.name = topic, "readers"
    request.endpoints.addresses.add(host="127.0.0.1", port=8081)
    return request


def push_settings_of(client_id: str, topic: str, expression: str) -> pb.Settings:
    settings = pb.Settings(client_type=pb.ClientType.PUSH_CONSUMER)
    settings.subscription.group.name = "readers"
    entry = settings.subscription.subscriptions.add()
    entry.topic.name = topic
    entry.expression.type, entry.expression.expression = pb.FilterType.TAG, expression
    return settings


def test_query_assignment_answers_the_member_s_queues_of_the_topic_once_it_joined() -> None:
    members = FakeMembers()
    endpoint = calls(members)
    endpoint.clients.settings("client-a", push_settings_of("client-a", TOPIC, "TagA"))
    member = member_of("client-a", TOPIC)
    members.queues[member] = [(TOPIC, 3), (TOPIC, 1)]
    answer = endpoint.QueryAssignment(query(), Context("client-a"))
    assert answer.status.code == Code.OK
    assert [a.message_queue.id for a in answer.assignments] == [1, 3]
    queue = answer.assignments[0].message_queue
    assert queue.topic.name == TOPIC and queue.broker.endpoints.addresses[0].port == 8081
    assert queue.permission == pb.Permission.READ_WRITE
    # It joined (receives handing nothing out) with the filter its Settings named.
    assert len(members.receives) == 2
    assert all(r["queues"] == () and r["member"] == member for r in members.receives)
    assert {str(r["tags"]) for r in members.receives} == {"TagA"}


def test_query_assignment_of_a_member_with_no_queue_yet_is_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(consumers, "_JOIN_SECONDS", 0.3)  # how long it waits for the join
    members = FakeMembers()
    members.joins_after = 10**6  # never dealt queues: the answer comes after the join wait
    endpoint = calls(members)
    answer = endpoint.QueryAssignment(query(), Context("client-b"))
    assert answer.status.code == Code.OK and not answer.assignments
    assert members.receives  # it took part in the group meanwhile


def test_a_push_receive_reads_the_named_queue_only_and_a_simple_one_every_queue() -> None:
    members = FakeMembers()
    endpoint = calls(members)
    request = service.ReceiveMessageRequest(batch_size=8, auto_renew=True)
    request.group.name, request.message_queue.topic.name = "readers", TOPIC
    request.message_queue.id = 2
    request.long_polling_timeout.FromMilliseconds(600)  # 0.1 s after the answer's margin
    (final,) = list(endpoint.ReceiveMessage(request, Context("client-a")))
    assert final.status.code == Code.MESSAGE_NOT_FOUND
    assert {r["queues"] == {(TOPIC, 2)} for r in members.receives} == {True}
    members.receives.clear()
    request.auto_renew = False
    request.invisible_duration.FromSeconds(30)
    list(endpoint.ReceiveMessage(request, Context("client-a")))
    assert [r["queues"] for r in members.receives] == [None]


def test_termination_has_the_client_s_members_leave_their_group() -> None:
    members = FakeMembers()
    endpoint = calls(members)
    settings = push_settings_of("client-a", TOPIC, "*")
    entry = settings.subscription.subscriptions.add()
    entry.topic.name = "Payments"
    endpoint.clients.settings("client-a", settings)
    endpoint.terminated("client-a", READER)
    assert sorted(members.left) == sorted(
        [("readers", member_of("client-a", TOPIC)), ("readers", member_of("client-a", "Payments"))]
    )
    members.left.clear()
    endpoint.terminated("client-a", READER)  # forgotten: nothing more
    assert members.left == []


def test_push_settings_say_not_fifo_with_a_batch_a_long_poll_and_a_backoff() -> None:
    settings = push_settings_of("client-a", TOPIC, "*")
    push_settings(settings, 5.0)
    subscription = settings.subscription
    assert not subscription.fifo and subscription.receive_batch_size == RECEIVE_BATCH_SIZE
    assert subscription.long_polling_timeout.ToMilliseconds() == 5000
    policy = settings.backoff_policy
    assert policy.max_attempts == MAX_ATTEMPTS
    assert policy.WhichOneof("strategy") == "exponential_backoff"
    assert policy.exponential_backoff.initial.seconds == 1


def test_clients_are_remembered_up_to_a_bound_oldest_forgotten_first() -> None:
    clients = PushClients(max_clients=2)
    for name in ("a", "b", "c"):
        clients.settings(name, push_settings_of(name, TOPIC, "*"))
    assert clients.of("a") is None and clients.of("c") is not None
    clients.settings("p", pb.Settings(client_type=pb.ClientType.PRODUCER))  # not a consumer
    assert clients.of("p") is None and clients.of("b") is not None


def test_the_assignment_lists_its_queues_in_order_and_is_push_tells_the_consumers_apart() -> None:
    answer = assignment_response(TOPIC, [2, 0], pb.Endpoints())
    assert [a.message_queue.id for a in answer.assignments] == [0, 2]
    assert answer.assignments[0].message_queue.accept_message_types == [pb.MessageType.TRANSACTION]
    push = service.ReceiveMessageRequest(auto_renew=True)
    simple = service.ReceiveMessageRequest(auto_renew=False)
    simple.invisible_duration.FromSeconds(30)
    assert is_push(push) and not is_push(simple)
