"""The name rules of the wire: topics, producer groups and transaction ids.

One place for each rule, so the SDK (before sending), the REST ingress (a 4xx) and the
ingest (quarantine, streams/ingest/transforms.py, which matches the same patterns with Spark's
rlike) accept exactly the same names (tests/streams/ingest/test_ingest_name_rules.py). Topic names
become table paths (`topics/<topic>`), so only letters, digits, '_' and '-' are accepted (RocketMQ's
alphabet less '%' and '|', which delta-rs and object_store decode or encode in a path) and system
topic names are refused: nothing a producer sends can address a path outside its topic's table.
"""

from __future__ import annotations

import re

from coordinator.protocol.ingress import (
    GROUP_PATTERN,
    NAME_CHARACTERS,
    NAME_CHARACTERS_TEXT,
    TRANSACTION_ID_PATTERN,
)

#: RocketMQ's TopicValidator less '%' and '|' (NAME_CHARACTERS); at most 127 characters.
TOPIC_NAME = re.compile(rf"^[{NAME_CHARACTERS}]{{1,127}}$")
#: What a refused topic is told.
TOPIC_RULE_TEXT = f"topic must be 1-127 characters of {NAME_CHARACTERS_TEXT}"

#: RocketMQ's system topics, and prefixes reserved for system use.
SYSTEM_TOPICS = frozenset(
    {
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SCHEDULE_TOPIC_XXXX",
        "TBW102",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "BenchmarkTest",
        "RMQ_SYS_TRACE_TOPIC",
        "system",
    }
)
SYSTEM_PREFIXES = ("RMQ_SYS_", "rmq_sys_", "%RETRY%", "%DLQ%", "%SYS%")

_TRANSACTION_ID = re.compile(TRANSACTION_ID_PATTERN)
_GROUP = re.compile(GROUP_PATTERN)


def topic_name_problem(topic: object) -> str | None:
    """Return why `topic` cannot be a topic name, or None if it can."""
    if not isinstance(topic, str):
        return f"topic must be a string, not {type(topic).__name__}"
    if not TOPIC_NAME.fullmatch(topic):
        return f"{TOPIC_RULE_TEXT}, not {topic[:140]!r}"
    if topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_PREFIXES):
        return f"topic {topic!r} is a system topic name and cannot be used"
    return None


def transaction_id_problem(value: object) -> str | None:
    """Return why `value` cannot be a transaction id, or None if it can."""
    if not isinstance(value, str):
        return f"transaction_id must be a string, not {type(value).__name__}"
    if not _TRANSACTION_ID.fullmatch(value):
        return f"transaction_id must be 1-128 printable ASCII characters, not {value[:140]!r}"
    return None


def group_problem(value: object, field: str = "producer_group") -> str | None:
    """Return why `value` cannot be a group (a producer group, or a consumer group: the same
    rule, `field` naming which), or None if it can."""
    if not isinstance(value, str):
        return f"{field} must be a string, not {type(value).__name__}"
    if not _GROUP.fullmatch(value):
        return f"{field} must be 1-255 characters of {NAME_CHARACTERS_TEXT}, not {value[:300]!r}"
    return None
