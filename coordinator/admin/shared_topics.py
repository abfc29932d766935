"""Whether the engine's own topics are still the engine's alone, asked of a live cluster.

In the per-group layout (coordinator/core/topics.py) three ingress topics belong to the
engine's principal: the operator topic named after it, `txcoord.operator.<engine>`, where the
REST ingress sends an admin's ops and the ingest takes the operator header as written (any
operator name), and the shared `txcoord.half` and `txcoord.op`, which carry the heartbeats
(anything else there is quarantined). So the first is safe only while nobody but the engine
may write it, and the others stay quiet only so (docs/security.md). `findings` asks the
cluster what it can and returns one sentence per way in:

- no authorizer at all: every client writes every topic;
- `allow.everyone.if.no.acl.found=true` on a broker: a topic without ACLs is open to all;
- an ACL that lets a principal other than the engine's write (or do ALL on) one of them:
  on its literal name, on a prefix of it (`txcoord.`, the mistake the docs warn about), or
  on the wildcard `*`;
- a question the cluster would not answer (this principal may not describe ACLs or
  configs): what was not checked, and why.

`txcoord provision` prints them (coordinator/commands/provision.py).
"""

from __future__ import annotations

from typing import Any

from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResource,
    ConfigResourceType,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import KafkaError, SecurityDisabledError

from coordinator.core.config import Config
from coordinator.kafka_clients.admin import admin_client

__all__ = ["WRITES", "covers", "engine_topics", "findings", "topic_acls"]

#: Operations that let a principal write a topic.
WRITES = {ACLOperation.WRITE, ACLOperation.ALL}


def engine_topics(config: Config) -> tuple[str, ...]:
    """Return the ingress topics only the engine's principal may write (per-group layout):
    its operator topic first, then the shared half and op topics."""
    layout = config.kafka.layout
    return (layout.operator_topic(config.kafka.principal), layout.half, layout.op)


def findings(config: Config) -> list[str]:
    """Return every way a principal other than the engine may write one of its topics."""
    kafka = config.kafka
    shared = engine_topics(config)
    engine = f"User:{kafka.principal}"
    found: list[str] = []
    with admin_client(kafka.bootstrap_servers, security=kafka.security) as admin:
        try:
            acls = topic_acls(admin)
        except SecurityDisabledError:
            return [
                "the cluster has no authorizer: every client may write every topic, so no "
                "group is kept apart (set authorizer.class.name and "
                "allow.everyone.if.no.acl.found=false)"
            ]
        except KafkaError as exc:
            found.append(
                f"the ACLs could not be read ({exc}): check by hand that only the "
                f"engine may write {', '.join(shared)}"
            )
            acls = []
        for acl in acls:
            # kafka-python hands the enums back as plain numbers.
            kind = ACLResourcePatternType(acl.resource_pattern.pattern_type)
            operation = ACLOperation(acl.operation)
            name = acl.resource_pattern.resource_name
            opens = [t for t in shared if covers(kind, name, t)]
            if (
                opens
                and operation in WRITES
                and ACLPermissionType(acl.permission_type) == ACLPermissionType.ALLOW
                and acl.principal != engine
            ):
                found.append(
                    f"{acl.principal} may {operation.name} topic(s) {', '.join(opens)} "
                    f"through the {kind.name.lower()} grant on {name!r}"
                    + (
                        f": on {shared[0]} it can act as any operator"
                        if shared[0] in opens
                        else ": only the engine's heartbeats belong there"
                    )
                    + " (grant literal names only: kafka-acls.sh --remove ...)"
                )
        found += _open_brokers(admin)
    return found


def topic_acls(admin: Any) -> list[Any]:
    """Return every ACL on a topic of the cluster `admin` is connected to (raises the
    broker's error: SecurityDisabledError without an authorizer)."""
    every = ACLFilter(
        None,
        None,
        ACLOperation.ANY,
        ACLPermissionType.ANY,
        ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY),
    )
    acls, _ = admin.describe_acls(every)  # kafka-python raises the broker's error
    return list(acls)


def covers(kind: ACLResourcePatternType, name: str, topic: str) -> bool:
    """Return True if a grant of pattern `kind` on `name` applies to `topic`."""
    if name == "*":
        return True
    if kind == ACLResourcePatternType.LITERAL:
        return name == topic
    if kind == ACLResourcePatternType.PREFIXED:
        return topic.startswith(name)
    return False


def _open_brokers(admin: Any) -> list[str]:
    """Return a finding per broker that lets everyone in where no ACL is found."""
    try:
        brokers = [str(b["broker_id"]) for b in admin.describe_cluster()["brokers"]]
        described: Any = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, broker) for broker in brokers]
        )
    except KafkaError as exc:
        return [f"the brokers' allow.everyone.if.no.acl.found could not be read ({exc})"]
    found = []
    for broker, entries in sorted(described.get("broker", {}).items()):
        entry = entries.get("allow.everyone.if.no.acl.found") or {}
        if str(entry.get("value")).lower() == "true":
            found.append(
                f"broker {broker} has allow.everyone.if.no.acl.found=true: a topic without "
                "ACLs is open to every client"
            )
    return found
