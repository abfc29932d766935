"""Which Kafka topic carries what: the shared layout, and one topic set per producer group.

Kafka authorizes by topic (and consumer group, transactional id), never by a record's
headers. So that a secured broker can keep producer groups apart (contract 5.2), a secured
deployment gives every group its own topics, and every operator principal its own op topic::

    shared (default: an open broker)       per group (`[kafka] topics_per_group = true`)
    txcoord.half    halves of every group   txcoord.half.<group>      the group's halves
    txcoord.op      ops of every group,     txcoord.op.<group>        the group's ops
                    operators' ops too      txcoord.operator.<principal>  that operator's ops
    txcoord.check   checks of every group   txcoord.check.<group>     the group's checks
    txcoord.consumer-offsets                txcoord.consumer-offsets.<consumer group>
                    offsets of every                          that consumer group's
                    consumer group                            committed offsets

In the per-group layout the shared half and op topics stay for the heartbeats
(streams/kafka_io/ticker.py) and carry nothing else: any other record there is quarantined, since
Kafka cannot say who wrote it. The REST ingress sends an admin's op to the operator topic of
its own principal (the engine's, `KafkaConfig.principal`), where the ingest takes the
`txcoord.operator` header as the recorded "who" (the REST ingress authenticated it); on any
other operator topic the principal in the name is the "who". ACLs then grant a
group's principal WRITE on its two ingress topics, READ on its check topic and WRITE
there for claims (coordinator/protocol/check_claim.py; literal names), an operator
principal WRITE on its own operator topic, and nothing else
(coordinator/runtime/local_stack/broker_auth.py). A consumer group's principal reads and
writes its own offsets topic, reads the deliveries topic and joins its Kafka consumer group
(`consumer_grants`): one group cannot move another's offsets (RocketMQ grants Sub per group).
Consumer groups are a namespace apart from producer groups: `orders` the consumer group and
`orders` the producer group share no topic.

The topic is the proof: the engine reads every ingress topic by one pattern
(`ingress_pattern`) and trusts only what the broker already checked. A record on
`txcoord.half.orders` whose `txcoord.producer_group` header names another group is
quarantined; an op with a `txcoord.operator` header on a group's op topic decides nothing
and is quarantined as refused; an op on `txcoord.operator.alice` is recorded as done by
`alice` (the header is at most a display name beside it).

Kafka topic names are `[A-Za-z0-9._-]`, at most 249 characters; a producer group's name is
`[A-Za-z0-9_-]` (coordinator/protocol/ingress.py), so only its length can keep it from
topics of its own (`group_topic_problem`); the shared layout takes any group. A consumer
group's offsets topic follows the same rules (`consumer_group_topic_problem`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "CHECKS_TRANSACTIONAL_PREFIX",
    "NOTICES_TRANSACTIONAL_PREFIX",
    "UNAUTHENTICATED_PRINCIPAL",
    "Grant",
    "TopicKind",
    "TopicLayout",
    "TopicRole",
    "check_consumer_group",
    "consumer_grants",
    "consumer_group_topic_problem",
    "consumer_kafka_group",
    "engine_grants",
    "grants",
    "group_topic_problem",
    "principal_problem",
    "transactional_id",
]

#: The principal Kafka gives a client that did not authenticate (PLAINTEXT, or TLS without
#: a client certificate): the engine's when it has no SASL user.
UNAUTHENTICATED_PRINCIPAL = "ANONYMOUS"
#: Kafka's own limit on a topic name.
KAFKA_TOPIC_MAX = 249
_SUFFIX = re.compile(r"[A-Za-z0-9_-]+")
#: A principal that names an operator topic: Kafka's topic alphabet (SCRAM user names of the
#: local broker are narrower still: coordinator/runtime/local_stack/broker_auth.py).
_PRINCIPAL = re.compile(r"[A-Za-z0-9._-]{1,64}")


class TopicKind(Enum):
    """What an ingress topic carries."""

    HALF = "half"
    OP = "op"
    OPERATOR = "operator"


@dataclass(frozen=True)
class TopicRole:
    """What one ingress topic is: its kind, and the group or operator it belongs to."""

    kind: TopicKind
    #: The group whose topic it is (per-group layout), or None for a shared topic.
    group: str | None = None
    #: The operator principal whose topic it is (kind OPERATOR only).
    principal: str | None = None


def group_topic_problem(group: str, layout: TopicLayout) -> str | None:
    """Return why `group` cannot have topics of its own in `layout`, or None if it can."""
    if not _SUFFIX.fullmatch(group):
        return (
            f"producer group {group[:300]!r} cannot have Kafka topics of its own (topics_per_group"
            " = true): a Kafka topic name holds letters, digits, '_' and '-' only, not '%' or '|'"
        )
    longest = max(len(layout.half), len(layout.op), len(layout.check)) + 1
    if longest + len(group) > KAFKA_TOPIC_MAX:
        return (
            f"producer group {group[:40]!r}... is too long for Kafka topics of its own "
            f"(topics_per_group = true): at most {KAFKA_TOPIC_MAX - longest} characters"
        )
    return None


def consumer_group_topic_problem(group: str, layout: TopicLayout) -> str | None:
    """Return why consumer group `group` cannot have an offsets topic of its own in
    `layout`, or None if it can."""
    if not _SUFFIX.fullmatch(group):
        return (
            f"consumer group {group[:300]!r} cannot have a Kafka offsets topic of its own "
            "(topics_per_group = true): its name may hold letters, digits, '_' and '-' only"
        )
    longest = len(layout.offsets) + 1
    if longest + len(group) > KAFKA_TOPIC_MAX:
        return (
            f"consumer group {group[:40]!r}... is too long for a Kafka offsets topic of its "
            f"own (topics_per_group = true): at most {KAFKA_TOPIC_MAX - longest} characters"
        )
    return None


def principal_problem(principal: str) -> str | None:
    """Return why `principal` cannot name an operator topic, or None if it can."""
    if not _PRINCIPAL.fullmatch(principal):
        return (
            f"operator principal {principal[:80]!r} must be 1-64 characters of letters, "
            "digits, '.', '_' or '-' to name its Kafka topic"
        )
    return None


@dataclass(frozen=True)
class TopicLayout:
    """The topic names of one deployment (`[kafka]` configuration)."""

    half: str = "txcoord.half"
    op: str = "txcoord.op"
    check: str = "txcoord.check"
    operator: str = "txcoord.operator"
    per_group: bool = False
    #: The consumer groups' committed offsets: one shared topic, or in the per-group
    #: layout the prefix of each consumer group's own (`offsets_topic`).
    offsets: str = "txcoord.consumer-offsets"
    #: The engine's delivery notices, which every consumer group reads.
    deliveries: str = "txcoord.deliveries"

    def half_topic(self, group: str) -> str:
        """Return the topic `group`'s halves go to."""
        return self._of(self.half, group)

    def op_topic(self, group: str) -> str:
        """Return the topic `group`'s producers' ops go to."""
        return self._of(self.op, group)

    def check_topic(self, group: str) -> str:
        """Return the topic `group`'s check requests go to."""
        return self._of(self.check, group)

    def operator_topic(self, principal: str | None) -> str:
        """Return the topic an operator's ops go to: its own, or the shared op topic.

        The shared layout has no operator topics: an operator writes the shared op topic.
        """
        if not self.per_group:
            return self.op
        if principal is None or (problem := principal_problem(principal)):
            raise ValueError(
                problem
                or "the per-group layout needs the operator's Kafka principal "
                "([kafka] sasl_username) to name its operator topic"
            )
        return f"{self.operator}.{principal}"

    def offsets_topic(self, consumer_group: str) -> str:
        """Return the topic `consumer_group`'s committed offsets go to: its own in the
        per-group layout (so that ACLs keep one group from moving another's), else the
        shared one."""
        if not self.per_group:
            return self.offsets
        if problem := consumer_group_topic_problem(consumer_group, self):
            raise ValueError(problem)
        return f"{self.offsets}.{consumer_group}"

    def offsets_group_of(self, topic: str) -> str | None:
        """Return the consumer group whose own offsets topic `topic` is (per-group layout),
        or None if it is none."""
        if not (self.per_group and topic.startswith(self.offsets + ".")):
            return None
        group = topic[len(self.offsets) + 1 :]
        return group if consumer_group_topic_problem(group, self) is None else None

    def _of(self, shared: str, group: str) -> str:
        if not self.per_group:
            return shared
        if problem := group_topic_problem(group, self):
            raise ValueError(problem)
        return f"{shared}.{group}"

    def ingress_pattern(self) -> str:
        """Return the Java regex of every ingress topic (Spark's `subscribePattern`)."""
        names = "|".join(re.escape(name) for name in (self.half, self.op))
        return rf"(?:{names})(?:\.[A-Za-z0-9_-]+)?|{re.escape(self.operator)}\.[A-Za-z0-9._-]+"

    def check_pattern(self) -> str:
        """Return the regex of every check topic of this layout."""
        if not self.per_group:
            return re.escape(self.check)
        return rf"{re.escape(self.check)}\.[A-Za-z0-9_-]+"

    def role_of(self, topic: str) -> TopicRole | None:
        """Return what ingress topic `topic` is, or None if it is none of this layout's."""
        for shared, kind in ((self.half, TopicKind.HALF), (self.op, TopicKind.OP)):
            if topic == shared:
                return TopicRole(kind)
            if topic.startswith(shared + ".") and _SUFFIX.fullmatch(topic[len(shared) + 1 :]):
                return TopicRole(kind, group=topic[len(shared) + 1 :])
        if topic.startswith(self.operator + "."):
            principal = topic[len(self.operator) + 1 :]
            if _PRINCIPAL.fullmatch(principal):
                return TopicRole(TopicKind.OPERATOR, principal=principal)
        return None


def check_consumer_group(producer_group: str) -> str:
    """Return the Kafka consumer group in which the producers of `producer_group` read checks.

    A secured broker grants each group's principal its own (`grants`).
    """
    return f"txcoord-sdk-{producer_group}"


def consumer_kafka_group(consumer_group: str) -> str:
    """Return the Kafka consumer group the members of txcoord consumer group
    `consumer_group` join, on the deliveries topic (coordinator/sdk/consumer/membership.py).

    A secured broker grants each consumer group's principal its own (`consumer_grants`).
    """
    return f"txcoord-consumer-{consumer_group}"


#: The transactional ids of the engine's two Kafka producers (streams/kafka_io/kafka_fence.py): its
#: check records, and its delivery notices. Each is followed by a digest of the warehouse
#: (`transactional_id`), so that every coordinator of one warehouse shares the id (a newer
#: one's start fences an older one's producer on Kafka) and coordinators of two warehouses
#: never fence each other.
CHECKS_TRANSACTIONAL_PREFIX = "txcoord-checks-"
NOTICES_TRANSACTIONAL_PREFIX = "txcoord-notices-"


def transactional_id(prefix: str, warehouse: str) -> str:
    """Return the transactional id of the engine's `prefix` producer for `warehouse`.

    A digest (SHA-256's first 16 hex digits), not the location itself: a location may be
    longer, and hold more characters, than an operator wants in an ACL or a broker's tools.
    The configuration makes a local warehouse absolute; a trailing `/` names the same place.
    """
    digest = hashlib.sha256(warehouse.rstrip("/").encode()).hexdigest()[:16]
    return f"{prefix}{digest}"


@dataclass(frozen=True)
class Grant:
    """One ALLOW ACL on a literal resource name: what keeps the groups apart."""

    principal: str  # a SASL user name (Kafka's principal is `User:<name>`)
    operation: str  # Kafka's ACL operation: WRITE, READ or DESCRIBE
    resource: str  # TOPIC, GROUP or TRANSACTIONAL_ID
    name: str


def grants(
    layout: TopicLayout, groups: dict[str, str], operators: tuple[str, ...] = ()
) -> list[Grant]:
    """Return the ACLs of the per-group layout: `groups` maps a producer group to the
    principal its producers log in as; `operators` are the operator principals.

    A group's principal writes its two ingress topics, reads its check topic and its SDK
    consumer group, and writes claims to its check topic; an operator writes its own
    operator topic; nothing else. The engine needs no grant here (docs/security.md: what
    the engine's principal needs).
    """
    found = [Grant(who, "WRITE", "TOPIC", layout.operator_topic(who)) for who in operators]
    for group, who in sorted(groups.items()):
        found += [
            Grant(who, "WRITE", "TOPIC", layout.half_topic(group)),
            Grant(who, "WRITE", "TOPIC", layout.op_topic(group)),
            Grant(who, "READ", "TOPIC", layout.check_topic(group)),
            # A producer instance claims the checks addressed to it that it answered
            # (coordinator/protocol/check_claim.py): its own group's check topic only.
            Grant(who, "WRITE", "TOPIC", layout.check_topic(group)),
            Grant(who, "READ", "GROUP", check_consumer_group(group)),
        ]
    return found


def consumer_grants(layout: TopicLayout, consumer_groups: dict[str, str]) -> list[Grant]:
    """Return the ACLs of SDK consumers in the per-group layout: `consumer_groups` maps a
    consumer group to the principal its members log in as.

    A consumer group's principal reads and writes its own offsets topic (a member loads the
    group's offsets and stores them), reads the deliveries topic (the notices every member
    reads) and its Kafka consumer group (membership and rebalances); nothing on another
    group's offsets topic, so it cannot move another group's offsets. Which topic tables it
    reads is the warehouse's to grant (docs/security.md). One principal may serve several
    consumer groups: each grant comes once.
    """
    if not layout.per_group:
        raise ValueError(
            "consumer groups are kept apart only in the per-group layout "
            "([kafka] topics_per_group = true): the shared offsets topic is every group's"
        )
    found: list[Grant] = []
    for group, who in sorted(consumer_groups.items()):
        own = layout.offsets_topic(group)
        found += [
            Grant(who, "READ", "TOPIC", own),
            Grant(who, "WRITE", "TOPIC", own),
            Grant(who, "READ", "TOPIC", layout.deliveries),
            Grant(who, "READ", "GROUP", consumer_kafka_group(group)),
        ]
    return list(dict.fromkeys(found))


def engine_grants(principal: str, warehouse: str) -> list[Grant]:
    """Return the ACLs the engine's `principal` needs for its transactional producers of
    `warehouse`: WRITE and DESCRIBE on both transactional ids (`transactional_id`).

    WRITE alone implies DESCRIBE in Kafka's authorizer; both are listed so that no
    authorizer's reading of it matters. No IdempotentWrite on the cluster: Kafka authorizes
    a transactional producer's id by the TransactionalId ACL alone.
    """
    return [
        Grant(principal, operation, "TRANSACTIONAL_ID", transactional_id(prefix, warehouse))
        for prefix in (CHECKS_TRANSACTIONAL_PREFIX, NOTICES_TRANSACTIONAL_PREFIX)
        for operation in ("WRITE", "DESCRIBE")
    ]
