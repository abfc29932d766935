"""The ingest's rules as Spark SQL expressions: the readable reference model of txcoord.Ingress.

Every rule is an expression here (`reference_parse`): malformed input of any shape becomes a
reason, never an exception (contract 5.2 and 9; with ANSI mode on, that means `try_cast`,
`get` and `is_valid_utf8` throughout). The query runs the JVM twin of these rules
(streams/jvm/txcoord/Ingress.java) instead: one function call per record rather than this
tree of a few hundred expressions, whose lambda functions kept Spark from generating its
code once per batch. tests/streams/ingest/test_ingest_twin.py proves that both give the same rows
for random records. What both are given (header names, limits, reason texts) is the
product's streams/ingest/rules.py.
"""

from __future__ import annotations

import functools

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from coordinator.core.topics import TopicLayout
from coordinator.protocol import ingress as fmt
from coordinator.protocol.names import SYSTEM_PREFIXES, SYSTEM_TOPICS, TOPIC_NAME
from streams.ingest.rules import (
    KIND_HALF,
    KIND_OP,
    LOG_APPEND_TIME,
    MAX_INT,
    PARSED_COLUMNS,
    TEXT_HEADERS,
    IngestRules,
    header_map,
    header_text,
    keys_json,
    messages,
)


def reference_parse(records: DataFrame, rules: IngestRules) -> DataFrame:
    """Return every record parsed (PARSED_COLUMNS), with `reason` NULL when valid.

    `records` has the Kafka source's columns. The reference model of txcoord.Ingress.
    """
    parse_columns, derive = _expressions(rules)
    parsed = records.withColumn("_header_map", header_map()).select(*parse_columns)
    derived = parsed.withColumn("headers", F.col("_headers")).select("*", *derive)
    return derived.select(*PARSED_COLUMNS)


def _source_columns(layout: TopicLayout) -> tuple[Column, ...]:
    """Return what the source topic says: `ingress_kind`, `_topic_group`, `_topic_principal`,
    `_on_shared` (a shared topic of the per-group layout: heartbeats only).

    In the per-group layout a record's group (or operator principal) is the suffix of the
    topic the broker let its producer write (coordinator/core/topics.py); the shared layout has
    none.
    """
    source = F.col("topic")

    def suffix(prefix: str) -> Column:
        return F.substring(source, len(prefix) + 2, 1 << 20)

    def under(prefix: str) -> Column:
        return source.startswith(prefix + ".") if layout.per_group else F.lit(False)

    kind = F.when((source == layout.half) | under(layout.half), F.lit(KIND_HALF)).when(
        (source == layout.op) | under(layout.op) | under(layout.operator), F.lit(KIND_OP)
    )
    group = F.when(under(layout.half), suffix(layout.half)).when(
        under(layout.op), suffix(layout.op)
    )
    principal = F.when(under(layout.operator), suffix(layout.operator))
    on_shared = F.lit(layout.per_group) & source.isin(layout.half, layout.op)
    return (
        kind.alias("ingress_kind"),
        group.cast("string").alias("_topic_group"),
        principal.cast("string").alias("_topic_principal"),
        F.coalesce(on_shared, F.lit(False)).alias("_on_shared"),
    )


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _header(name: str) -> Column:
    """Return the value (binary) of header `name` from the parsed header map, NULL if absent."""
    return F.try_element_at(F.col("_header_map"), F.lit(name))


def _text(name: str) -> Column:
    """Return header `name` as a string, NULL when absent or not valid UTF-8."""
    return header_text(F.col("_header_map"), name)


def _bad_utf8(name: str) -> Column:
    raw = _header(name)
    return raw.isNotNull() & ~F.is_valid_utf8(raw)


def _first_problem(checks: list[tuple[Column, str]], texts: dict[str, str]) -> Column:
    """Return the text of the first check that holds, else NULL (checks are (failed, id)).

    A flat coalesce (evaluated left to right, stopping at the first non-NULL) rather than
    nested CASE expressions: deep expression trees make code generation slow.
    """
    return F.coalesce(*[F.when(failed, F.lit(texts[reason])) for failed, reason in checks])


@functools.lru_cache(maxsize=8)
def _expressions(rules: IngestRules) -> tuple[tuple[Column, ...], tuple[Column, ...]]:
    """Build the classification's columns once per rule set.

    Building an expression tree from Python costs one JVM call per node (hundreds for this
    one); Column objects are not bound to a DataFrame, so calls reuse them.
    """
    texts = messages(rules)
    property_headers = F.expr(
        f"filter(headers, h -> startswith(h.key, {_sql_string(fmt.PROPERTY_PREFIX)}))"
    )
    parse = (
        F.col("_header_map"),
        F.col("key"),
        F.col("value"),
        F.col("headers"),
        F.col("topic").alias("source_topic"),
        F.col("partition").alias("source_partition"),
        F.col("offset").alias("source_offset"),
        F.col("timestamp").alias("stored_at"),
        F.col("timestampType").alias("timestamp_type"),
        F.coalesce(F.col("headers"), F.array()).alias("_headers"),
        F.when(F.is_valid_utf8("key"), F.col("key").cast("string")).alias("transaction_id"),
        _text(fmt.KIND).alias("_kind"),
        _text(fmt.PRODUCER_GROUP).alias("producer_group"),
        _text(fmt.TOPIC).alias("topic"),
        _text(fmt.QUEUE_ID).alias("_queue_id"),
        _text(fmt.KEYS).alias("_keys"),
        _text(fmt.TAGS).alias("tags"),
        _text(fmt.CHECK_IMMUNITY_SECONDS).alias("_immunity"),
        _text(fmt.BORN_AT).alias("_born_at"),
        _text(fmt.OP).alias("op"),
        _text(fmt.FROM_CHECK).alias("_from_check"),
        _text(fmt.OPERATOR).alias("operator"),
        _text(fmt.REASON).alias("reason_text"),
        property_headers.alias("_properties"),
        *_source_columns(rules.layout),
    )

    is_half = F.col("ingress_kind") == KIND_HALF
    is_op = F.col("ingress_kind") == KIND_OP
    topic_group = F.col("_topic_group")
    topic_principal = F.col("_topic_principal")
    header_keys = F.expr("transform(headers, h -> h.key)")
    keys = keys_json(F.col("_keys"))
    # As JSON writes an integer, the REST ingress's: no sign, leading zero or spaces (a cast
    # would trim and take them).
    queue_id = F.when(
        F.col("_queue_id").rlike(r"^(0|[1-9][0-9]{0,3})\z"), F.col("_queue_id").cast("int")
    )
    # Digits only, as JSON writes an integer (no sign, exponent, leading zero or spaces) and in
    # range: anything else is a reason,
    # and the conversions below only ever see a value already known to fit (ANSI mode turns
    # an overflowing timestamp_millis or cast into an exception that would stop the stream).
    immunity = F.when(
        F.col("_immunity").rlike(r"^(0|[1-9][0-9]{0,17})\z"), F.col("_immunity").cast("bigint")
    )
    # The column is an int: a configuration allowing more (68 years) is capped, not overflowed.
    immunity_ok = immunity.isNotNull() & (
        immunity <= min(rules.max_check_immunity_seconds, MAX_INT)
    )
    born_at = F.when(
        F.col("_born_at").rlike(r"^(0|[1-9][0-9]{0,17})\z"), F.col("_born_at").cast("bigint")
    )
    born_at_ok = born_at.isNotNull() & (born_at <= fmt.MAX_BORN_AT_MS)
    header_bytes = F.aggregate(
        F.col("_headers"),
        F.lit(0).cast("bigint"),
        lambda total, h: total + F.octet_length(h.key) + F.coalesce(F.length(h.value), F.lit(0)),
    )
    budget_bytes = F.aggregate(
        F.filter(
            F.col("_headers"),
            lambda h: h.key.isin(fmt.KEYS, fmt.TAGS) | h.key.startswith(fmt.PROPERTY_PREFIX),
        ),
        F.lit(0).cast("bigint"),
        lambda total, h: total + F.octet_length(h.key) + F.coalesce(F.length(h.value), F.lit(0)),
    )
    system_topic = F.col("topic").isin(*SYSTEM_TOPICS)
    for prefix in SYSTEM_PREFIXES:
        system_topic = system_topic | F.col("topic").startswith(prefix)
    bad_text = F.lit(False)
    for name in TEXT_HEADERS:
        bad_text = bad_text | _bad_utf8(name)
    # A property is text: a header without a value has none to deliver (the REST ingress's
    # properties are strings; NULL must not reach a consumer as the text "null").
    bad_property = F.exists(
        F.col("_properties"), lambda h: h.value.isNull() | ~F.is_valid_utf8(h.value)
    )
    property_name = fmt.java_full_match(fmt.PROPERTY_NAME_PATTERN)
    is_tick = F.coalesce(F.col("_kind") == fmt.KIND_TICK, F.lit(False))
    common: list[tuple[Column, str]] = [
        (F.col("timestamp_type") != LOG_APPEND_TIME, "create_time"),
        (F.size(F.array_distinct(header_keys)) != F.size(header_keys), "duplicate_header"),
        (bad_text, "bad_text"),
        (F.col("_kind").isNotNull() & ~is_tick, "kind_not_tick"),
        (header_bytes > fmt.MAX_HEADER_BYTES, "header_bytes"),
    ]
    message: list[tuple[Column, str]] = [
        (F.col("_on_shared"), "shared_topic"),
        (F.col("key").isNull(), "key_missing"),
        (F.col("transaction_id").isNull(), "key_not_utf8"),
        (~F.col("transaction_id").rlike(fmt.java_full_match(fmt.TRANSACTION_ID_PATTERN)),
         "transaction_id"),
        (F.col("producer_group").isNull(), "group_missing"),
        (~F.col("producer_group").rlike(fmt.java_full_match(fmt.GROUP_PATTERN)),
         "group_pattern"),
        (topic_group.isNotNull() & (F.col("producer_group") != topic_group), "group_topic"),
        (F.col("_born_at").isNotNull() & ~born_at_ok, "born_at"),
    ]  # fmt: skip
    half_rules: list[tuple[Column, str]] = [
        (F.col("topic").isNull(), "topic_missing"),
        (~F.col("topic").rlike(fmt.java_full_match(TOPIC_NAME.pattern)), "topic_pattern"),
        (system_topic, "system_topic"),
        (_not_allowed(rules.allowed_topics), "topic_not_allowed"),
        (F.col("_queue_id").isNotNull()
         & (queue_id.isNull() | (queue_id < 0) | (queue_id > fmt.MAX_QUEUE_ID)), "queue_id"),
        (_header(fmt.MSG_ID).isNotNull(), "msg_id"),
        (F.col("_immunity").isNotNull() & immunity.isNull(), "immunity_format"),
        (F.col("_immunity").isNotNull() & ~immunity_ok, "immunity_max"),
        (F.coalesce(F.length("value"), F.lit(0)) > rules.max_message_size, "body_size"),
        (F.col("_keys").isNotNull() & (keys.isNull() | F.exists(keys, lambda k: k.isNull())),
         "keys_json"),
        (bad_property, "property_utf8"),
        (F.exists(F.col("_properties"), lambda h: F.length(h.key) <= len(fmt.PROPERTY_PREFIX)),
         "property_no_name"),
        (F.exists(F.col("_properties"), lambda h: ~F.substring(
            h.key, len(fmt.PROPERTY_PREFIX) + 1, 1 << 20).rlike(property_name)),
         "property_name"),
        (budget_bytes > fmt.HEADER_BUDGET, "header_budget"),
    ]  # fmt: skip
    op_rules: list[tuple[Column, str]] = [
        (F.col("op").isNull(), "op_missing"),
        (topic_group.isNotNull() & F.col("operator").isNotNull(), "operator_on_group_topic"),
        (topic_principal.isNotNull() & F.col("operator").isNull(), "operator_missing"),
        (~F.col("op").isin(*fmt.OPS, *fmt.OPERATOR_OPS), "op_value"),
        (F.col("op").isin(*fmt.OPERATOR_OPS) & F.col("operator").isNull(), "resume_operator"),
        (F.col("_from_check").isNotNull() & ~F.col("_from_check").isin("true", "false"),
         "from_check"),
        (F.col("operator").isNotNull()
         & ((F.length("operator") < 1) | (F.length("operator") > fmt.MAX_OPERATOR_LENGTH)),
         "operator_length"),
        (F.col("reason_text").isNotNull() & F.col("operator").isNull(), "reason_needs_operator"),
        (F.length("reason_text") > fmt.MAX_REASON_LENGTH, "reason_length"),
    ]  # fmt: skip
    if [reason for _, reason in common + message + half_rules + op_rules] != list(texts):
        raise AssertionError("the rules and their messages are out of step")

    def first(checks: list[tuple[Column, str]]) -> Column:
        return _first_problem(checks, texts)

    # A heartbeat carries nothing but its store time: only the common rules apply to it.
    reason = F.coalesce(
        first(common),
        F.when(
            ~is_tick,
            F.coalesce(
                F.when(is_half, F.coalesce(first(message), first(half_rules))),
                F.when(is_op, F.coalesce(first(message), first(op_rules))),
            ),
        ),
    )
    default_queue = F.pmod(F.crc32("key"), F.lit(rules.default_queue_count)).cast("int")
    derive = (
        reason.alias("reason"),
        is_tick.alias("is_tick"),
        F.coalesce(queue_id, default_queue).alias("queue_id"),
        F.concat(_hex(F.col("source_partition"), 4), _hex(F.col("source_offset"), 16)).alias(
            "msg_id"
        ),
        keys.alias("keys"),
        # Only when no header repeats: a repeated prop.* key must be a reason, not a
        # DUPLICATED_MAP_KEY error that would stop the stream.
        F.when(
            F.size(F.array_distinct(header_keys)) == F.size(header_keys),
            F.map_from_entries(
                F.transform(
                    "_properties",
                    lambda h: F.struct(
                        F.substring(h.key, len(fmt.PROPERTY_PREFIX) + 1, 1 << 20).alias("key"),
                        h.value.cast("string").alias("value"),
                    ),
                )
            ),
        ).alias("properties"),
        # 0 means none (the timeout); an invalid value is a reason above, NULL here.
        F.when(immunity_ok & (immunity > 0), immunity).cast("int").alias("check_immunity_seconds"),
        F.timestamp_millis(F.when(born_at_ok, born_at)).alias("born_at"),
        F.coalesce(F.col("_from_check") == "true", F.lit(False)).alias("from_check"),
        # Who did an operator's op: the principal the broker let write its operator topic,
        # with the header's name beside it as a display name (coordinator/core/topics.py); on
        # the engine's own operator topic the header as written.
        F.when(
            topic_principal.isNull() | (topic_principal == rules.engine_principal),
            F.col("operator"),
        )
        .when(F.col("operator") == topic_principal, topic_principal)
        .otherwise(
            F.concat(
                topic_principal,
                F.lit(" ("),
                F.expr(
                    f"substring(operator, 1, "
                    f"{fmt.MAX_OPERATOR_LENGTH - 3} - length(_topic_principal))"
                ),
                F.lit(")"),
            )
        )  # coordinator/protocol/records.py's operator_label
        .alias("who"),
        # Fixed-width hex: op ids sort like (partition, offset), so the tie-break of contract 3
        # (same store time: lower op id first) follows the order within a partition.
        F.concat(
            F.lit("op-"),
            _hex(F.col("source_partition"), 4),
            F.lit("-"),
            _hex(F.col("source_offset"), 16),
        ).alias("op_id"),
    )
    return parse, derive


def _hex(number: Column, width: int) -> Column:
    return F.lpad(F.hex(number), width, "0")


def _not_allowed(allowed: tuple[str, ...] | None) -> Column:
    """A half's topic outside the configured ones (auto_create_topic_enable off)."""
    if allowed is None:
        return F.lit(False)
    return ~F.col("topic").isin(*allowed)
