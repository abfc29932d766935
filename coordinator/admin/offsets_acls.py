"""Whether each consumer group's offsets topic is still its own, asked of a live cluster.

In the per-group layout (coordinator/core/topics.py) a consumer group's committed offsets are
in a topic of its own, `<consumer_offsets_topic>.<group>`, and `consumer_grants` lets only
its principal write it. A grant that also covers it for another principal (a prefixed one on
`txcoord.consumer-offsets`, say, or the wildcard `*`) lets that principal move the group's
offsets: back, and the group reads again what it had read; forward, past what it never read.
`offsets_findings` returns one sentence per such grant, for `txcoord provision
--consumer-group` (coordinator/commands/provision.py). A cluster without an authorizer, or one
that lets everyone in where no ACL is found, is coordinator/admin/shared_topics.py's finding.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka.admin import ACLOperation, ACLPermissionType, ACLResourcePatternType
from kafka.errors import KafkaError, SecurityDisabledError

from coordinator.admin.shared_topics import WRITES, covers, topic_acls
from coordinator.core.config import Config
from coordinator.kafka_clients.admin import admin_client

__all__ = ["offsets_findings"]


def offsets_findings(config: Config, consumer_groups: Mapping[str, str]) -> list[str]:
    """Return every grant that lets a principal other than a consumer group's own (in
    `consumer_groups`: group -> principal) or the engine's write that group's offsets topic."""
    if not consumer_groups:
        return []
    kafka = config.kafka
    engine = f"User:{kafka.principal}"
    with admin_client(kafka.bootstrap_servers, security=kafka.security) as admin:
        try:
            acls = topic_acls(admin)
        except SecurityDisabledError:
            return []  # no authorizer at all: shared_topics.findings says so
        except KafkaError as exc:
            return [
                f"the ACLs could not be read ({exc}): check by hand that only each consumer "
                "group's principal may write its offsets topic"
            ]
    found = []
    for acl in acls:
        # kafka-python hands the enums back as plain numbers.
        kind = ACLResourcePatternType(acl.resource_pattern.pattern_type)
        operation = ACLOperation(acl.operation)
        name = acl.resource_pattern.resource_name
        if (
            operation not in WRITES
            or ACLPermissionType(acl.permission_type) != ACLPermissionType.ALLOW
        ):
            continue
        for group, principal in sorted(consumer_groups.items()):
            topic = kafka.layout.offsets_topic(group)
            if covers(kind, name, topic) and acl.principal not in (f"User:{principal}", engine):
                found.append(
                    f"{acl.principal} may {operation.name} the offsets topic of consumer group "
                    f"{group!r} ({topic}) through the {kind.name.lower()} grant on {name!r}: "
                    "it can move that group's offsets (grant literal names only: "
                    "kafka-acls.sh --remove ...)"
                )
    return found
