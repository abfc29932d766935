"""Which Kafka topic carries what: the shared layout, and one topic set per producer group.

Kafka authorizes by topic (and consumer group, transactional id), never by a record's
headers. So that a secured broker can keep producer groups apart (contract 5.2), a secured
deployment gives every group its own topics, and every operator principal its own op topic::

    shared (default: an open broker)       per group (`[kafka] topics_per_group = true`)
    txcoord.half    halves of every group   txcoord.half.<group>      the group's halves
    txcoord.op      ops of every group,     txcoord.op.<group>        the group's ops
                    operators' ops too      txcoord.operator.<principal>  that operator's ops
    txcoord.check   checks of every group   txcoord.check.<group>     the group's checks

In the per-group layout the shared half and op topics stay for the heartbeats
(streams/ticker.py) and carry nothing else: any other record there is quarantined, since
Kafka cannot say who wrote it. The REST ingress sends an admin's op to the operator topic of
its own principal (the engine's, `KafkaConfig.principal`), where the ingest takes the
`txcoord.operator` header as the recorded "who" (the REST ingress authenticated it); on any
other operator topic the principal in the name is the "who". ACLs then grant a
group's principal WRITE on its two ingress topics, READ on its check topic and WRITE
there for claims (coordinator/protocol/check_claim.py; literal names), an operator
principal WRITE on its own operator topic, and nothing else
(coordinator/runtime/local_stack/broker_auth.py).

The topic is the proof: the engine reads every ingress topic by one pattern
(`ingress_pattern`) and trusts only what the broker already checked. A record on
`txcoord.half.orders` whose `txcoord.producer_group` header names another group is
quarantined; an op with a `txcoord.operator` header on a group's op topic decides nothing
and is quarantined as refused; an op on `txcoord.operator.alice` is recorded as done by
`alice` (the header is at most a display name beside it).

Kafka topic names are `[A-Za-z0-9._-]`, at most 249 characters; a producer group's name is
`[A-Za-z0-9_-]` (coordinator/protocol/ingress.py), so only its length can keep it from
topics of its own (`group_topic_problem`); the shared layout takes any group.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "UNAUTHENTICATED_PRINCIPAL",
    "Grant",
    "TopicKind",
    "TopicLayout",
    "TopicRole",
    "check_consumer_group",
    "grants",
    "group_topic_problem",
    "principal_problem",
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


@dataclass(frozen=True)
class Grant:
    """One ALLOW ACL on a literal resource name: what keeps the groups apart."""

    principal: str  # a SASL user name (Kafka's principal is `User:<name>`)
    operation: str  # Kafka's ACL operation: WRITE or READ
    resource: str  # TOPIC or GROUP
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
