"""Whether the shared topics are still the engine's alone, asked of a live cluster.

In the per-group layout (coordinator/core/topics.py) `txcoord.half` and `txcoord.op` stay:
they carry the heartbeats and the REST ingress's operator ops, and what is written there is
trusted as the shared layout trusts it (any group header, any operator header). That is
safe only while nobody but the engine may write them (docs/security.md). `findings` asks
the cluster what it can and returns one sentence per way in:

- no authorizer at all: every client writes every topic;
- `allow.everyone.if.no.acl.found=true` on a broker: a topic without ACLs is open to all;
- an ACL that lets a principal other than the engine's write (or do ALL on) a shared
  topic: on its literal name, on a prefix of it (`txcoord.`, the mistake the docs warn
  about), or on the wildcard `*`;
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

#: Operations that let a principal write a topic.
_WRITES = {ACLOperation.WRITE, ACLOperation.ALL}


def findings(config: Config) -> list[str]:
    """Return every way a principal other than the engine may write a shared topic."""
    kafka = config.kafka
    layout = kafka.layout
    shared = (layout.half, layout.op)
    engine = f"User:{kafka.security.sasl_username}" if kafka.security.sasl_username else None
    found: list[str] = []
    with admin_client(kafka.bootstrap_servers, security=kafka.security) as admin:
        try:
            acls = _topic_acls(admin)
        except SecurityDisabledError:
            return [
                "the cluster has no authorizer: every client may write every topic, so no "
                "group is kept apart (set authorizer.class.name and "
                "allow.everyone.if.no.acl.found=false)"
            ]
        except KafkaError as exc:
            found.append(f"the ACLs could not be read ({exc}): check by hand that only the "
                         f"engine may write {', '.join(shared)}")  # fmt: skip
            acls = []
        for acl in acls:
            # kafka-python hands the enums back as plain numbers.
            kind = ACLResourcePatternType(acl.resource_pattern.pattern_type)
            operation = ACLOperation(acl.operation)
            name = acl.resource_pattern.resource_name
            opens = [t for t in shared if _covers(kind, name, t)]
            if (
                opens
                and operation in _WRITES
                and ACLPermissionType(acl.permission_type) == ACLPermissionType.ALLOW
                and acl.principal != engine
            ):
                found.append(
                    f"{acl.principal} may {operation.name} topic(s) {', '.join(opens)} "
                    f"through the {kind.name.lower()} grant on {name!r}: it can act for "
                    "every group and as any operator there (grant literal names only: "
                    "kafka-acls.sh --remove ...)"
                )
        found += _open_brokers(admin)
    return found


def _topic_acls(admin: Any) -> list[Any]:
    every = ACLFilter(
        None,
        None,
        ACLOperation.ANY,
        ACLPermissionType.ANY,
        ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY),
    )
    acls, _ = admin.describe_acls(every)  # kafka-python raises the broker's error
    return list(acls)


def _covers(kind: ACLResourcePatternType, name: str, topic: str) -> bool:
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
