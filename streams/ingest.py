"""Pure transforms of the ingest stream: Kafka ingress records -> halves, ops, quarantine.

`classify` turns the raw records of one micro-batch (the Kafka source's columns) into one
frame with every field parsed and a `reason` that is NULL for a valid record and says
what is wrong otherwise (`parse`, then `stamp` with the ingest time). `halves`, `ops`,
`ticks` and `quarantined` select from it. Malformed input of any shape becomes a reason,
never an exception, so the stream keeps running (SPEC 5.2 and 9).

The rules are streams/ingest_rules.py's (the readable reference model, in Spark SQL); `parse`
runs their JVM twin, `txcoord.Ingress` (streams/jvm/), one function call per record.

Store time is the broker's LogAppendTime (`timestampType = 1`); a record stamped with the
producer's CreateTime is quarantined, because the coordinator must never take its event
time from a producer's clock (a clock in the future would move the watermark for every
transaction).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from delta_tables import half_messages, op_records
from protocol import ingress as fmt
from streams.ingest_rules import (
    KIND_HALF,
    KIND_OP,
    PARSED_COLUMNS,
    IngestRules,
    header_map,
    header_text,
    keys_json,
    twin_spec,
)

__all__ = [
    "KIND_HALF", "KIND_OP", "IngestRules", "classify", "halves", "ops", "parse", "quarantined",
    "stamp", "ticks",
]  # fmt: skip


def parse(records: DataFrame, rules: IngestRules) -> DataFrame:
    """Return every record parsed (ingest_rules.PARSED_COLUMNS), with `reason` NULL when valid.

    `records` has the Kafka source's columns. Nothing here changes from one batch to the
    next (no per-batch literal such as a timestamp, which Spark would inline into generated
    code): `stamp` adds the time afterwards.
    """
    spark = records.sparkSession
    framed = records.withColumn("_keys_json", keys_json(header_text(header_map(), fmt.KEYS)))
    ingress = spark._jvm.txcoord.Ingress  # type: ignore[union-attr]
    parsed = DataFrame(ingress.parse(framed._jdf, twin_spec(rules)), spark)
    out = {
        "headers": F.coalesce(F.col("headers"), F.array()),
        "source_topic": F.col("topic"),
        "source_partition": F.col("partition"),
        "source_offset": F.col("offset"),
        "stored_at": F.col("timestamp"),
        "timestamp_type": F.col("timestampType"),
        "keys": F.col("_keys_json"),
        "born_at": F.timestamp_millis(F.col("_parsed.born_at_ms")),
        "key": F.col("key"),
        "value": F.col("value"),
    }
    return parsed.select(
        *[out.get(name, F.col(f"_parsed.{name}")).alias(name) for name in PARSED_COLUMNS]
    )


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
