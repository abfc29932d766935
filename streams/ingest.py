"""Pure transforms of the ingest stream: Kafka ingress records -> halves, ops, quarantine.

`classify` turns the raw records of one micro-batch (the Kafka source's columns) into one
frame with every field parsed and a `reason` that is NULL for a valid record and says
what is wrong otherwise (`parse`, then `stamp` with the ingest time). `halves`, `ops`,
`ticks` and `quarantined` select from it. Every rule is a Spark SQL expression (no Python
UDF): malformed input of any shape becomes a reason, never an exception, so the stream
keeps running (SPEC 5.2 and 9). With ANSI mode on, that means `try_cast`, `get` (NULL
when out of range) and `is_valid_utf8` throughout.

Store time is the broker's LogAppendTime (`timestampType = 1`); a record stamped with the
producer's CreateTime is quarantined, because the coordinator must never take its event
time from a producer's clock (a clock in the future would move the watermark for every
transaction).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from core.topics import TopicLayout
from delta_tables import half_messages, op_records
from protocol import ingress as fmt
from protocol.names import SYSTEM_PREFIXES, SYSTEM_TOPICS, TOPIC_NAME

LOG_APPEND_TIME = 1
MAX_INT = 2**31 - 1


@dataclass(frozen=True)
class IngestRules:
    """The parts of the configuration that validation needs."""

    #: Which topic carries what (core/topics.py): a record's kind, and in the per-group
    #: layout its group or operator, come from the topic it was read from.
    layout: TopicLayout
    max_message_size: int
    default_queue_count: int
    #: Config.max_check_immunity in seconds: a larger check_immunity_seconds is quarantined.
    max_check_immunity_seconds: int


#: `ingress_kind` of a record read from a half topic, and from an op or operator topic.
KIND_HALF, KIND_OP = "half", "op"


def _source_columns(layout: TopicLayout) -> tuple[Column, ...]:
    """Return what the source topic says: `ingress_kind`, `_topic_group`, `_topic_principal`.

    In the per-group layout a record's group (or operator principal) is the suffix of the
    topic the broker let its producer write (core/topics.py); the shared layout has none.
    """
    source = F.col("topic")

    def suffix(prefix: str) -> Column:
        return F.substring(source, len(prefix) + 2, 1 << 20)

    def under(prefix: str) -> Column:
        return source.startswith(prefix + ".") if layout.per_group else F.lit(False)

    kind = (
        F.when((source == layout.half) | under(layout.half), F.lit(KIND_HALF))
        .when((source == layout.op) | under(layout.op) | under(layout.operator), F.lit(KIND_OP))
    )  # fmt: skip
    group = F.when(under(layout.half), suffix(layout.half)).when(
        under(layout.op), suffix(layout.op)
    )
    principal = F.when(under(layout.operator), suffix(layout.operator))
    return (
        kind.alias("ingress_kind"),
        group.cast("string").alias("_topic_group"),
        principal.cast("string").alias("_topic_principal"),
    )


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _header(name: str) -> Column:
    """Return the value (binary) of header `name` from the parsed header map, NULL if absent."""
    return F.try_element_at(F.col("_header_map"), F.lit(name))


def _text(name: str) -> Column:
    """Return header `name` as a string, NULL when absent or not valid UTF-8."""
    raw = _header(name)
    return F.when(F.is_valid_utf8(raw), raw.cast("string"))


def _bad_utf8(name: str) -> Column:
    raw = _header(name)
    return raw.isNotNull() & ~F.is_valid_utf8(raw)


def _first_problem(checks: list[tuple[Column, str]]) -> Column:
    """Return the message of the first check that holds, else NULL.

    A flat coalesce (evaluated left to right, stopping at the first non-NULL) rather than
    nested CASE expressions: deep expression trees make code generation slow.
    """
    return F.coalesce(*[F.when(failed, F.lit(message)) for failed, message in checks])


def parse(records: DataFrame, rules: IngestRules) -> DataFrame:
    """Return every record parsed, with `reason` NULL when valid, without `ingested_at`.

    Nothing here changes from one batch to the next, so Spark generates the same code for
    it every batch and compiles it once: a per-batch literal (a timestamp is inlined into
    the generated Java) would make it compile the largest projection of the system again
    every batch. `stamp` adds the time afterwards, over the cached rows.
    """
    header_map, parse_columns, derive = _expressions(rules)
    parsed = records.withColumn("_header_map", header_map).select(*parse_columns)
    return parsed.withColumn("headers", F.col("_headers")).select("*", *derive)


def stamp(parsed: DataFrame, ingested_at: Column | None = None) -> DataFrame:
    """Return `parsed` with `ingested_at` (default: the query's current timestamp)."""
    landed = ingested_at if ingested_at is not None else F.current_timestamp()
    return parsed.withColumn("ingested_at", landed)


def classify(
    records: DataFrame, rules: IngestRules, ingested_at: Column | None = None
) -> DataFrame:
    """Return every record parsed, with `reason` NULL when valid (see the module docstring).

    `ingested_at` defaults to the query's current timestamp.
    """
    return stamp(parse(records, rules), ingested_at)


@functools.lru_cache(maxsize=8)
def _expressions(rules: IngestRules) -> tuple[Column, tuple[Column, ...], tuple[Column, ...]]:
    """Build the classification's columns once per rule set.

    Building an expression tree from Python costs one JVM call per node (hundreds for this
    one, every batch); Column objects are not bound to a DataFrame, so batches reuse them.
    """
    property_headers = F.expr(
        f"filter(headers, h -> startswith(h.key, {_sql_string(fmt.PROPERTY_PREFIX)}))"
    )
    # Headers are parsed into a map once; a repeated header is caught by the rule below,
    # and the session's LAST_WIN map policy keeps the map from failing on it.
    header_map = F.map_from_entries(F.coalesce(F.col("headers"), F.array()))
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
    keys_json = F.from_json(F.col("_keys"), "array<string>")
    queue_id = F.expr("try_cast(_queue_id as int)")
    # Digits only (no sign, exponent or spaces) and in range: anything else is a reason,
    # and the conversions below only ever see a value already known to fit (ANSI mode turns
    # an overflowing timestamp_millis or cast into an exception that would stop the stream).
    immunity = F.when(
        F.col("_immunity").rlike(r"^[0-9]{1,18}\z"), F.col("_immunity").cast("bigint")
    )
    # The column is an int: a configuration allowing more (68 years) is capped, not overflowed.
    immunity_ok = immunity.isNotNull() & (
        immunity <= min(rules.max_check_immunity_seconds, MAX_INT)
    )
    born_at = F.when(F.col("_born_at").rlike(r"^[0-9]{1,18}\z"), F.col("_born_at").cast("bigint"))
    born_at_ok = born_at.isNotNull() & (born_at <= fmt.MAX_BORN_AT_MS)
    header_bytes = F.aggregate(
        F.col("_headers"), F.lit(0).cast("bigint"),
        lambda total, h: total + F.octet_length(h.key) + F.coalesce(F.length(h.value), F.lit(0)),
    )  # fmt: skip
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
    text_headers = [fmt.KIND, fmt.PRODUCER_GROUP, fmt.TOPIC, fmt.QUEUE_ID, fmt.KEYS, fmt.TAGS,
                    fmt.CHECK_IMMUNITY_SECONDS, fmt.BORN_AT, fmt.OP, fmt.FROM_CHECK, fmt.OPERATOR,
                    fmt.REASON]  # fmt: skip
    bad_text = F.lit(False)
    for name in text_headers:
        bad_text = bad_text | _bad_utf8(name)
    bad_property = F.exists(
        F.col("_properties"), lambda h: h.value.isNotNull() & ~F.is_valid_utf8(h.value)
    )
    property_name = fmt.java_full_match(fmt.PROPERTY_NAME_PATTERN)
    is_tick = F.coalesce(F.col("_kind") == fmt.KIND_TICK, F.lit(False))
    common: list[tuple[Column, str]] = [
        (F.col("timestamp_type") != LOG_APPEND_TIME,
         "record has CreateTime: ingress topics must use message.timestamp.type=LogAppendTime"),
        (F.size(F.array_distinct(header_keys)) != F.size(header_keys), "a header appears twice"),
        (bad_text, "a txcoord.* header is not valid UTF-8"),
        (F.col("_kind").isNotNull() & ~is_tick, "txcoord.kind must be TICK when present"),
        (header_bytes > fmt.MAX_HEADER_BYTES,
         f"the headers take more than {fmt.MAX_HEADER_BYTES} bytes together"),
    ]  # fmt: skip
    message: list[tuple[Column, str]] = [
        (F.col("key").isNull(), "the record key (transaction id) is missing"),
        (F.col("transaction_id").isNull(), "the record key (transaction id) is not valid UTF-8"),
        (~F.col("transaction_id").rlike(fmt.java_full_match(fmt.TRANSACTION_ID_PATTERN)),
         "the transaction id must be 1-128 printable ASCII characters"),
        (F.col("producer_group").isNull(), f"header {fmt.PRODUCER_GROUP} is missing"),
        (~F.col("producer_group").rlike(fmt.java_full_match(fmt.GROUP_PATTERN)),
         f"header {fmt.PRODUCER_GROUP} must match {fmt.GROUP_PATTERN} (the whole value)"),
        (topic_group.isNotNull() & (F.col("producer_group") != topic_group),
         f"refused: header {fmt.PRODUCER_GROUP} names another group than the group topic the "
         f"record was written to (a group's topics carry only its own records)"),
        (F.col("_born_at").isNotNull() & ~born_at_ok,
         f"header {fmt.BORN_AT} must be epoch milliseconds, digits only, "
         f"0..{fmt.MAX_BORN_AT_MS} (2262-04-11T23:47:16.854Z)"),
    ]  # fmt: skip
    half_rules: list[tuple[Column, str]] = [
        (F.col("topic").isNull(), f"header {fmt.TOPIC} (the real topic) is missing"),
        (~F.col("topic").rlike(fmt.java_full_match(TOPIC_NAME.pattern)),
         "the real topic must be 1-127 characters of letters, digits, '_', '%', '|' or '-'"),
        (system_topic, "the real topic is a system topic name"),
        (F.col("_queue_id").isNotNull()
         & (queue_id.isNull() | (queue_id < 0) | (queue_id > fmt.MAX_QUEUE_ID)),
         f"header {fmt.QUEUE_ID} must be an integer 0..{fmt.MAX_QUEUE_ID}"),
        (_header(fmt.MSG_ID).isNotNull(),
         f"header {fmt.MSG_ID} is not accepted: the msg id is always the record's position"),
        (F.col("_immunity").isNotNull() & immunity.isNull(),
         f"header {fmt.CHECK_IMMUNITY_SECONDS} must be a decimal integer of seconds "
         f"(digits only), 0..{rules.max_check_immunity_seconds}"),
        (F.col("_immunity").isNotNull() & ~immunity_ok,
         f"header {fmt.CHECK_IMMUNITY_SECONDS} is above max_check_immunity "
         f"({rules.max_check_immunity_seconds} s)"),
        (F.coalesce(F.length("value"), F.lit(0)) > rules.max_message_size,
         f"the body is larger than max_message_size ({rules.max_message_size} bytes)"),
        (F.col("_keys").isNotNull()
         & (keys_json.isNull() | F.exists(keys_json, lambda k: k.isNull())),
         f"header {fmt.KEYS} must be a JSON array of strings"),
        (bad_property, "a prop.* header value is not valid UTF-8"),
        (F.exists(F.col("_properties"), lambda h: F.length(h.key) <= len(fmt.PROPERTY_PREFIX)),
         "a prop.* header has no property name"),
        (F.exists(F.col("_properties"), lambda h: ~F.substring(
            h.key, len(fmt.PROPERTY_PREFIX) + 1, 1 << 20).rlike(property_name)),
         "a prop.* header's property name must be 1-255 characters without control characters"),
        (budget_bytes > fmt.HEADER_BUDGET,
         f"keys, tags and properties take more than {fmt.HEADER_BUDGET} bytes together"),
    ]  # fmt: skip
    op_rules: list[tuple[Column, str]] = [
        (F.col("op").isNull(), f"header {fmt.OP} is missing"),
        (topic_group.isNotNull() & F.col("operator").isNotNull(),
         f"refused: an operator's op (header {fmt.OPERATOR}) is accepted only on an operator "
         f"topic ({rules.layout.operator}.<principal>), not on a group's op topic"),
        (topic_principal.isNotNull() & F.col("operator").isNull(),
         f"an op on an operator topic must carry header {fmt.OPERATOR}"),
        (~F.col("op").isin(*fmt.OPS, *fmt.OPERATOR_OPS),
         f"header {fmt.OP} must be {', '.join(fmt.OPS)} or {', '.join(fmt.OPERATOR_OPS)}"),
        (F.col("op").isin(*fmt.OPERATOR_OPS) & F.col("operator").isNull(),
         f"{fmt.OP} RESUME is an operator's op: header {fmt.OPERATOR} is required"),
        (F.col("_from_check").isNotNull() & ~F.col("_from_check").isin("true", "false"),
         f"header {fmt.FROM_CHECK} must be true or false"),
        (F.col("operator").isNotNull()
         & ((F.length("operator") < 1) | (F.length("operator") > fmt.MAX_OPERATOR_LENGTH)),
         f"header {fmt.OPERATOR} must be 1-{fmt.MAX_OPERATOR_LENGTH} characters"),
        (F.col("reason_text").isNotNull() & F.col("operator").isNull(),
         f"header {fmt.REASON} needs header {fmt.OPERATOR} (an operator's op)"),
        (F.length("reason_text") > fmt.MAX_REASON_LENGTH,
         f"header {fmt.REASON} must be at most {fmt.MAX_REASON_LENGTH} characters"),
    ]  # fmt: skip
    # A heartbeat carries nothing but its store time: only the common rules apply to it.
    reason = F.coalesce(
        _first_problem(common),
        F.when(
            ~is_tick,
            F.coalesce(
                F.when(is_half, F.coalesce(_first_problem(message), _first_problem(half_rules))),
                F.when(is_op, F.coalesce(_first_problem(message), _first_problem(op_rules))),
            ),
        ),
    )
    default_queue = F.pmod(F.crc32("key"), F.lit(rules.default_queue_count)).cast("int")
    msg_id = F.concat(
        F.lpad(F.hex("source_partition"), 4, "0"), F.lpad(F.hex("source_offset"), 16, "0")
    )
    derive = (
        reason.alias("reason"),
        is_tick.alias("is_tick"),
        F.coalesce(queue_id, default_queue).alias("queue_id"),
        msg_id.alias("msg_id"),
        keys_json.alias("keys"),
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
        # with the header's name beside it as a display name (core/topics.py).
        F.when(
            topic_principal.isNull() | (F.col("operator") == topic_principal),
            F.coalesce(topic_principal, F.col("operator")),
        )
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
        )  # protocol/records.py's operator_label
        .alias("who"),
        # Fixed-width hex: op ids sort like (partition, offset), so the tie-break of SPEC 3
        # (same store time: lower op id first) follows the order within a partition.
        F.concat(
            F.lit("op-"),
            F.lpad(F.hex("source_partition"), 4, "0"),
            F.lit("-"),
            F.lpad(F.hex("source_offset"), 16, "0"),
        ).alias("op_id"),
    )
    return header_map, parse, derive


def halves(classified: DataFrame, rules: IngestRules) -> DataFrame:
    """Return the valid half messages, in the column order of `system/half_messages`."""
    valid = classified.where(
        F.col("reason").isNull() & ~F.col("is_tick") & (F.col("ingress_kind") == KIND_HALF)
    )
    return valid.select(
        F.lit(half_messages.KIND_HALF).alias("kind"),
        "transaction_id", "msg_id", "producer_group", "topic", "queue_id",
        F.col("value").alias("body"), "keys", "tags", "properties", "check_immunity_seconds",
        "born_at", "stored_at",
        F.col("source_partition").alias("ingress_partition"),
        F.col("source_offset").alias("ingress_offset"),
        "ingested_at",
    )  # fmt: skip


def ops(classified: DataFrame, rules: IngestRules) -> DataFrame:
    """Return the valid op records, in the column order of `system/op_records`."""
    valid = classified.where(
        F.col("reason").isNull() & ~F.col("is_tick") & (F.col("ingress_kind") == KIND_OP)
    )
    return valid.select(
        F.lit(op_records.KIND_OP).alias("kind"),
        "op_id", "transaction_id", "producer_group", "op", "from_check",
        F.col("who").alias("operator"),
        F.col("reason_text").alias("reason"), "born_at", "stored_at",
        F.col("source_partition").alias("ingress_partition"),
        F.col("source_offset").alias("ingress_offset"),
        "ingested_at",
    )  # fmt: skip


def ticks(classified: DataFrame, kind: str) -> DataFrame:
    """Return one heartbeat (the newest) among the tick records of topics of `kind`, if any."""
    newest = (
        classified.where(
            F.col("reason").isNull() & F.col("is_tick") & (F.col("ingress_kind") == kind)
        )
        .orderBy(F.col("stored_at").desc(), F.col("source_partition"))
        .limit(1)
    )
    return newest.select(
        "stored_at",
        F.col("source_partition").alias("ingress_partition"),
        F.col("source_offset").alias("ingress_offset"),
        "ingested_at",
    )


def quarantined(classified: DataFrame) -> DataFrame:
    """Return the invalid records, in the column order of `system/quarantine`."""
    return classified.where(F.col("reason").isNotNull()).select(
        "source_topic", "source_partition", "source_offset", "key", "value", "headers",
        "reason", "stored_at", F.col("ingested_at").alias("quarantined_at"),
    )  # fmt: skip
