"""The ingest's rules as data: what the JVM's `txcoord.Ingress` is given to validate a record.

The query runs the rules in the JVM (streams/jvm/txcoord/Ingress.java), through
streams/ingest/transforms.py's `parse`: one function call per record. This module holds what that
twin is handed (`twin_spec`: every header name, pattern, limit and reason text), the columns it
returns, and the few header helpers the query shares. The readable reference model of the rules, a
tree of Spark SQL expressions, lives with the tests that hold the two together
(tests/reference/ingest_rules.py, tests/streams/ingest/test_ingest_twin.py).

Each fact has one home: the header names, patterns and limits are
coordinator/protocol/ingress.py's and coordinator/protocol/names.py's, the texts of the
reasons are `messages`, and `twin_spec` hands all of them to the JVM; only the logic is
written twice (the JVM twin and the reference model). A reason's id names its rule in both.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from coordinator.core.topics import UNAUTHENTICATED_PRINCIPAL, TopicLayout
from coordinator.protocol import ingress as fmt
from coordinator.protocol.names import SYSTEM_PREFIXES, SYSTEM_TOPICS, TOPIC_NAME, TOPIC_RULE_TEXT

LOG_APPEND_TIME = 1
MAX_INT = 2**31 - 1


@dataclass(frozen=True)
class IngestRules:
    """The parts of the configuration that validation needs."""

    #: Which topic carries what (coordinator/core/topics.py): a record's kind, and in the per-group
    #: layout its group or operator, come from the topic it was read from.
    layout: TopicLayout
    max_message_size: int
    default_queue_count: int
    #: Config.max_check_immunity in seconds: a larger check_immunity_seconds is quarantined.
    max_check_immunity_seconds: int
    #: Config.allowed_topics: the topics a half may name, or None for any (auto-created).
    allowed_topics: tuple[str, ...] | None = None
    #: The engine's Kafka principal (KafkaConfig.principal): on its operator topic the
    #: operator header is the recorded "who" as written (the REST ingress authenticated it).
    engine_principal: str = UNAUTHENTICATED_PRINCIPAL


#: `ingress_kind` of a record read from a half topic, and from an op or operator topic.
KIND_HALF, KIND_OP = "half", "op"

#: The parsed columns, in order (streams/ingest/transforms.py's `parse`, and the reference model's).
PARSED_COLUMNS = (
    "key",
    "value",
    "headers",
    "source_topic",
    "source_partition",
    "source_offset",
    "stored_at",
    "timestamp_type",
    "transaction_id",
    "producer_group",
    "topic",
    "tags",
    "op",
    "operator",
    "reason_text",
    "ingress_kind",
    "reason",
    "is_tick",
    "queue_id",
    "msg_id",
    "keys",
    "properties",
    "check_immunity_seconds",
    "born_at",
    "from_check",
    "who",
    "op_id",
)

#: The txcoord.* headers whose values are text: one that is not valid UTF-8 is a reason.
TEXT_HEADERS = (
    fmt.KIND,
    fmt.PRODUCER_GROUP,
    fmt.TOPIC,
    fmt.QUEUE_ID,
    fmt.KEYS,
    fmt.TAGS,
    fmt.CHECK_IMMUNITY_SECONDS,
    fmt.BORN_AT,
    fmt.OP,
    fmt.FROM_CHECK,
    fmt.OPERATOR,
    fmt.REASON,
)


def messages(rules: IngestRules) -> dict[str, str]:
    """Return the text of every reason by its id, in the order the rules are tried.

    The common rules come first (a heartbeat obeys only those), then those of halves and
    ops alike, then a half's, then an op's.
    """
    immunity = rules.max_check_immunity_seconds
    return {
        "create_time": "record has CreateTime: ingress topics must use "
        "message.timestamp.type=LogAppendTime",
        "duplicate_header": "a header appears twice",
        "bad_text": "a txcoord.* header is not valid UTF-8",
        "kind_not_tick": "txcoord.kind must be TICK when present",
        "header_bytes": f"the headers take more than {fmt.MAX_HEADER_BYTES} bytes together",
        "shared_topic": "refused: in the per-group layout (topics_per_group = true) the shared "
        f"topics {rules.layout.half} and {rules.layout.op} carry only the engine's heartbeats "
        f"(a group writes {rules.layout.half}.<group> and {rules.layout.op}.<group>, an "
        f"operator {rules.layout.operator}.<principal>)",
        "key_missing": "the record key (transaction id) is missing",
        "key_not_utf8": "the record key (transaction id) is not valid UTF-8",
        "transaction_id": "the transaction id must be 1-128 printable ASCII characters",
        "group_missing": f"header {fmt.PRODUCER_GROUP} is missing",
        "group_pattern": f"header {fmt.PRODUCER_GROUP} must match {fmt.GROUP_PATTERN} "
        "(the whole value)",
        "group_topic": f"refused: header {fmt.PRODUCER_GROUP} names another group than the "
        "group topic the record was written to (a group's topics carry only its own records)",
        "born_at": f"header {fmt.BORN_AT} must be epoch milliseconds, digits only, "
        f"0..{fmt.MAX_BORN_AT_MS} (2262-04-11T23:47:16.854Z)",
        "topic_missing": f"header {fmt.TOPIC} (the real topic) is missing",
        "topic_pattern": f"the real {TOPIC_RULE_TEXT}",
        "system_topic": "the real topic is a system topic name",
        "topic_not_allowed": "the real topic is not one of the configured topics "
        "(auto_create_topic_enable is off: add it to `topics`)",
        "queue_id": f"header {fmt.QUEUE_ID} must be an integer 0..{fmt.MAX_QUEUE_ID}",
        "msg_id": f"header {fmt.MSG_ID} is not accepted: the msg id is always the record's "
        "position",
        "immunity_format": f"header {fmt.CHECK_IMMUNITY_SECONDS} must be a decimal integer "
        f"of seconds (digits only), 0..{immunity}",
        "immunity_max": f"header {fmt.CHECK_IMMUNITY_SECONDS} is above max_check_immunity "
        f"({immunity} s)",
        "body_size": f"the body is larger than max_message_size ({rules.max_message_size} bytes)",
        "keys_json": f"header {fmt.KEYS} must be a JSON array of strings",
        "property_utf8": "a prop.* header value must be UTF-8 text (not missing)",
        "property_no_name": "a prop.* header has no property name",
        "property_name": "a prop.* header's property name must be 1-255 characters without "
        "control characters",
        "header_budget": f"keys, tags and properties take more than {fmt.HEADER_BUDGET} "
        "bytes together",
        "op_missing": f"header {fmt.OP} is missing",
        "operator_on_group_topic": f"refused: an operator's op (header {fmt.OPERATOR}) is "
        f"accepted only on an operator topic ({rules.layout.operator}.<principal>), not on a "
        "group's op topic",
        "operator_missing": f"an op on an operator topic must carry header {fmt.OPERATOR}",
        "op_value": f"header {fmt.OP} must be {', '.join(fmt.OPS)} or "
        f"{', '.join(fmt.OPERATOR_OPS)}",
        "resume_operator": f"{fmt.OP} RESUME is an operator's op: header {fmt.OPERATOR} is "
        "required",
        "from_check": f"header {fmt.FROM_CHECK} must be true or false",
        "operator_length": f"header {fmt.OPERATOR} must be 1-{fmt.MAX_OPERATOR_LENGTH} characters",
        "reason_needs_operator": f"header {fmt.REASON} needs header {fmt.OPERATOR} (an "
        "operator's op)",
        "reason_length": f"header {fmt.REASON} must be at most {fmt.MAX_REASON_LENGTH} characters",
    }


def topic_limit_messages(max_topics: int, max_per_group: int) -> tuple[str, str]:
    """Return the reasons of a valid half refused by the topic limits (auto_create_topic_enable
    on; streams/ingest/topic_admission.py): past the warehouse's limit, and past its group's."""
    share = "those let in before it in its batch count, each ingress partition its share"
    return (
        f"topic limit: the real topic is new, and there is no room for it under max_topics "
        f"({max_topics}) (the topics the warehouse knows; {share})",
        f"topic limit: the real topic is new, and there is no room for it under "
        f"max_topics_per_group ({max_per_group}) (the topics its producer group brought in; "
        f"{share})",
    )


@functools.lru_cache(maxsize=8)
def twin_spec(rules: IngestRules) -> str:
    """Return, as JSON, everything the JVM twin (`txcoord.Ingress`) needs besides a record."""
    layout = rules.layout
    return json.dumps(
        {
            "layout": {
                "half": layout.half,
                "op": layout.op,
                "operator": layout.operator,
                "per_group": layout.per_group,
                "engine_principal": rules.engine_principal,
            },
            "headers": {
                "kind": fmt.KIND,
                "producer_group": fmt.PRODUCER_GROUP,
                "topic": fmt.TOPIC,
                "queue_id": fmt.QUEUE_ID,
                "msg_id": fmt.MSG_ID,
                "keys": fmt.KEYS,
                "tags": fmt.TAGS,
                "check_immunity_seconds": fmt.CHECK_IMMUNITY_SECONDS,
                "born_at": fmt.BORN_AT,
                "op": fmt.OP,
                "from_check": fmt.FROM_CHECK,
                "operator": fmt.OPERATOR,
                "reason": fmt.REASON,
            },
            "property_prefix": fmt.PROPERTY_PREFIX,
            "text_headers": list(TEXT_HEADERS),
            "kind_tick": fmt.KIND_TICK,
            "ops": list(fmt.OPS),
            "operator_ops": list(fmt.OPERATOR_OPS),
            "system_topics": sorted(SYSTEM_TOPICS),
            "system_prefixes": list(SYSTEM_PREFIXES),
            "allowed_topics": (
                None if rules.allowed_topics is None else sorted(rules.allowed_topics)
            ),
            "patterns": {
                "transaction_id": fmt.java_full_match(fmt.TRANSACTION_ID_PATTERN),
                "group": fmt.java_full_match(fmt.GROUP_PATTERN),
                "topic": fmt.java_full_match(TOPIC_NAME.pattern),
                "property_name": fmt.java_full_match(fmt.PROPERTY_NAME_PATTERN),
            },
            "limits": {
                "max_queue_id": fmt.MAX_QUEUE_ID,
                "max_born_at_ms": fmt.MAX_BORN_AT_MS,
                "max_header_bytes": fmt.MAX_HEADER_BYTES,
                "header_budget": fmt.HEADER_BUDGET,
                "max_operator_length": fmt.MAX_OPERATOR_LENGTH,
                "max_reason_length": fmt.MAX_REASON_LENGTH,
                "max_message_size": rules.max_message_size,
                # The column is an int: a configuration allowing more (68 years) is capped.
                "immunity_cap": min(rules.max_check_immunity_seconds, MAX_INT),
                "default_queue_count": rules.default_queue_count,
            },
            "messages": messages(rules),
        }
    )


def header_map() -> Column:
    """Return the headers as a map (binary values) with no lambda function.

    A repeated header is a reason (`duplicate_header`); the session's LAST_WIN map policy
    keeps the map from failing on it, and the last value wins.
    """
    return F.map_from_entries(F.coalesce(F.col("headers"), F.array()))


def header_text(headers: Column, name: str) -> Column:
    """Return header `name` of map `headers` as a string, NULL when absent or not UTF-8."""
    raw = F.try_element_at(headers, F.lit(name))
    return F.when(F.is_valid_utf8(raw), raw.cast("string"))


def keys_json(text: Column) -> Column:
    """Return the txcoord.keys header's text parsed as a JSON array of strings (else NULL).

    Strings only, as the REST ingress's keys: from_json alone would turn `[1, {}]` into
    `["1", "{}"]`, so the array's element type is read first (`[]` has none: VOID).
    """
    strings = F.schema_of_variant(F.try_parse_json(text)).isin("ARRAY<STRING>", "ARRAY<VOID>")
    return F.when(strings, F.from_json(text, "array<string>"))
