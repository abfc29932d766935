"""Pure transforms of the ingest stream: Kafka ingress records -> halves, ops, quarantine.

`classify` turns the raw records of one micro-batch (the Kafka source's columns) into one
frame with every field parsed and a `reason` that is NULL for a valid record and says
what is wrong otherwise (`parse`, then `stamp` with the ingest time). `halves`, `ops`,
`ticks` and `quarantined` select from it. Malformed input of any shape becomes a reason,
never an exception, so the stream keeps running (contract 5.2 and 9).

The rules are streams/ingest/rules.py's (the readable reference model, in Spark SQL); `parse`
runs their JVM twin, `txcoord.Ingress` (streams/jvm/), one function call per record.

Store time is the broker's LogAppendTime (`timestampType = 1`); a record stamped with the
producer's CreateTime is quarantined, because the coordinator must never take its event
time from a producer's clock (a clock in the future would move the watermark for every
transaction).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from coordinator.protocol import ingress as fmt
from delta_tables import half_messages, op_records, quarantine
from streams.ingest.rules import (
    KIND_HALF,
    KIND_OP,
    PARSED_COLUMNS,
    IngestRules,
    header_map,
    header_text,
    keys_json,
    twin_spec,
)
from streams.writes.arrow_rows import project

__all__ = [
    "KIND_HALF",
    "KIND_OP",
    "IngestRules",
    "classify",
    "half_rows",
    "halves",
    "op_rows",
    "ops",
    "parse",
    "quarantine_rows",
    "quarantined",
    "stamp",
]


def parse(records: DataFrame, rules: IngestRules, admission: Any = None) -> DataFrame:
    """Return every record parsed (ingest_rules.PARSED_COLUMNS), with `reason` NULL when valid.

    `records` has the Kafka source's columns. Nothing here changes from one batch to the
    next (no per-batch literal such as a timestamp, which Spark would inline into generated
    code): `stamp` adds the time afterwards. `admission`, the JVM holder of the topic limits
    (streams/ingest/topic_admission.py), refuses a valid half that would bring in a topic past
    them: the driver changes what it knows between batches, and each batch's tasks carry
    what it knew when the batch began.
    """
    spark = records.sparkSession
    framed = records.withColumn("_keys_json", keys_json(header_text(header_map(), fmt.KEYS)))
    ingress = spark._jvm.txcoord.Ingress  # type: ignore[union-attr]
    spec = twin_spec(rules)
    parsed = DataFrame(
        ingress.parse(framed._jdf, spec)
        if admission is None
        else ingress.parse(framed._jdf, spec, admission),
        spark,
    )
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


def _landed(classified: pa.Table, kind: str, *, tick: bool) -> pa.Table:
    """Return the valid records of `kind`, heartbeats (`tick`) or not."""
    valid = pc.and_(pc.is_null(classified["reason"]), pc.equal(classified["ingress_kind"], kind))
    is_tick = pc.fill_null(classified["is_tick"], False)
    return classified.filter(pc.and_(valid, is_tick if tick else pc.invert(is_tick)))


#: Where a landed row's columns come from, when not from the record's column of that name.
_POSITION = {"ingress_partition": "source_partition", "ingress_offset": "source_offset"}


def _with_heartbeat(
    rows: pa.Table, classified: pa.Table, kind: str, schema: StructType, tick_kind: str
) -> pa.Table:
    """Return `rows` plus the newest heartbeat of topics of `kind`, if the batch read one, as
    a row of `tick_kind` with only its times and position (the landing's event-time mark)."""
    ticks = _landed(classified, kind, tick=True)
    if ticks.num_rows == 0:
        return rows
    order = [("stored_at", "descending"), ("source_partition", "ascending")]
    newest = ticks.take(pc.sort_indices(ticks, order)[:1])
    kept = {"stored_at", "ingested_at", *_POSITION}
    blank = {field.name: None for field in schema if field.name not in kept}
    beat = project(
        newest,
        schema,
        {**blank, "kind": tick_kind, "transaction_id": half_messages.HEARTBEAT_ID},
        renamed=_POSITION,
    )
    return pa.concat_tables([rows, beat])


def half_rows(classified: pa.Table) -> pa.Table:
    """Return the valid half messages and the newest half heartbeat, as rows of
    `system/half_messages` (`classified`: `classify`'s columns, as Arrow)."""
    rows = project(
        _landed(classified, KIND_HALF, tick=False),
        half_messages.SCHEMA,
        {"kind": half_messages.KIND_HALF},
        renamed={**_POSITION, "body": "value"},
    )
    return _with_heartbeat(
        rows, classified, KIND_HALF, half_messages.SCHEMA, half_messages.KIND_TICK
    )


def op_rows(classified: pa.Table) -> pa.Table:
    """Return the valid op records and the newest op heartbeat, as rows of
    `system/op_records` (`classified`: `classify`'s columns, as Arrow)."""
    rows = project(
        _landed(classified, KIND_OP, tick=False),
        op_records.SCHEMA,
        {"kind": op_records.KIND_OP},
        renamed={**_POSITION, "operator": "who", "reason": "reason_text"},
    )
    return _with_heartbeat(rows, classified, KIND_OP, op_records.SCHEMA, op_records.KIND_TICK)


def quarantine_rows(classified: pa.Table) -> pa.Table:
    """Return the invalid records as rows of `system/quarantine`."""
    bad = classified.filter(pc.is_valid(classified["reason"]))
    return project(bad, quarantine.SCHEMA, renamed={"quarantined_at": "ingested_at"})


def _spark_rows(
    classified: DataFrame, rows_of: Callable[[pa.Table], pa.Table], schema: StructType
) -> DataFrame:
    """Return `rows_of` the records of `classified` as a Spark frame of `schema`."""
    table = rows_of(classified.toArrow())
    spark = classified.sparkSession
    # PySpark cannot take an Arrow table of no rows.
    return spark.createDataFrame(table) if table.num_rows else spark.createDataFrame([], schema)


def halves(classified: DataFrame, rules: IngestRules) -> DataFrame:
    """Return the valid half messages, in the column order of `system/half_messages`."""
    return _spark_rows(classified, half_rows, half_messages.SCHEMA).where(
        F.col("kind") == half_messages.KIND_HALF
    )


def ops(classified: DataFrame, rules: IngestRules) -> DataFrame:
    """Return the valid op records, in the column order of `system/op_records`."""
    return _spark_rows(classified, op_rows, op_records.SCHEMA).where(
        F.col("kind") == op_records.KIND_OP
    )


def quarantined(classified: DataFrame) -> DataFrame:
    """Return the invalid records, in the column order of `system/quarantine`."""
    return _spark_rows(classified, quarantine_rows, quarantine.SCHEMA)
