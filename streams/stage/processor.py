"""The coordinator's stateful stage: PySpark's handle on its JVM processor (streams/jvm/).

Every per-transaction step runs in the JVM: `txcoord.Stage.decisions` groups the stage's
input by (producer group, transaction id) and runs `txcoord.TransactionProcessor` through
Spark's `transformWithState`, in event time. The processor follows `txcoord.Lifecycle`, the
JVM twin of tests/reference/lifecycle.py (the readable reference model; tests/streams/
test_lifecycle_twin.py proves that both agree on random histories). This module only says,
once per query, what the stage needs: the input and output schemas, the rules, the table of
legal moves (core/state_machine.TRANSITIONS) and the heartbeat id. Nothing of the
rules is written twice: the JVM receives them from here.

Times cross into the JVM as epoch milliseconds (long columns), so no time zone can creep in.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from coordinator.core.state_machine import TRANSITIONS
from delta_tables.columns import MESSAGE
from delta_tables.half_messages import HEARTBEAT_ID
from streams.checkpoint.generations import PARTITIONS_CONF
from streams.ingest.land_rows import KIND_LAND, RAW_PREFIX
from streams.stage.lifecycle import Rules

if TYPE_CHECKING:
    from py4j.java_gateway import JavaObject

#: The grouping key of the stage: what identifies a transaction (contract 3).
KEY = ("producer_group", "transaction_id")

#: The input column holding a half's body: the landed record's value (streams/ingest/land_rows.py).
LANDED_BODY = RAW_PREFIX + "value"

#: What the stage receives: a half or an op (or a heartbeat: transaction id HEARTBEAT_ID).
INPUT_SCHEMA = StructType(
    [
        *[StructField(key, StringType()) for key in KEY],
        # the half: h_<column of the half message>, its store time in milliseconds; its body
        # is the landed record's (LANDED_BODY): the shuffle carries it once
        *[StructField(f"h_{f.name}", f.dataType) for f in MESSAGE[1:] if f.name != "body"],
        StructField("h_check_immunity_seconds", IntegerType()),
        StructField("h_stored_ms", LongType()),
        # the op: o_<column of the op record>
        StructField("o_op_id", StringType()),
        StructField("o_producer_group", StringType()),
        StructField("o_op", StringType()),
        StructField("o_from_check", BooleanType()),
        StructField("o_operator", StringType()),
        StructField("o_reason", StringType()),
        StructField("o_stored_ms", LongType()),
    ]
)

#: What the stage emits; `kind` says which fields matter (see lifecycle.Kind).
OUTPUT_SCHEMA = StructType(
    [
        StructField("kind", StringType()),
        StructField("transaction_id", StringType()),
        StructField("at_ms", LongType()),
        *MESSAGE[1:],
        StructField("check_immunity_seconds", IntegerType()),
        StructField("prepared_ms", LongType()),
        StructField("check_number", IntegerType()),
        StructField("state", StringType()),
        StructField("reason", StringType()),
        StructField("check_count", IntegerType()),
        StructField("deciding_op_id", StringType()),
        StructField("op_id", StringType()),
        StructField("op_producer_group", StringType()),
        StructField("op", StringType()),
        StructField("op_from_check", BooleanType()),
        StructField("op_operator", StringType()),
        StructField("op_reason", StringType()),
        StructField("op_stored_ms", LongType()),
        StructField("verdict", StringType()),
        StructField("detail", StringType()),
    ]
)


def transitions_table() -> list[list[str]]:
    """Return core/state_machine.TRANSITIONS as rows (state, event, new state, verdict)."""
    return [
        [state.name, event.value, outcome.state.name, outcome.verdict.value]
        for state, moves in TRANSITIONS.items()
        for event, outcome in moves.items()
    ]


def output_schema(input_schema: StructType) -> StructType:
    """Return the stage's output for an input of `input_schema`: OUTPUT_SCHEMA, then the
    input's pass-through columns (named RAW_PREFIX + ...: the parsed ingress record)."""
    passed = [
        StructField(field.name, field.dataType)  # nullable: a decision's row has none
        for field in input_schema
        if field.name.startswith(RAW_PREFIX)
    ]
    return StructType([*OUTPUT_SCHEMA, *passed])


def stage_spec(rules: Rules, output: StructType) -> str:
    """Return, as JSON, everything the JVM stage needs besides its input."""
    return json.dumps(
        {
            "rules": asdict(rules),
            "transitions": transitions_table(),
            "output_schema": output.json(),
            "heartbeat_id": HEARTBEAT_ID,
            "landing": {"kind": KIND_LAND, "prefix": RAW_PREFIX, "body": LANDED_BODY},
        }
    )


def decisions(
    stage_rows: DataFrame,
    rules: Rules,
    initial: DataFrame | None = None,
    applied: JavaObject | None = None,
) -> DataFrame:
    """Return the stateful stage's output for its input (`initial`: the state a new
    checkpoint starts from, rows of KEY then state_schema()'s fields; streams/state/rebuild.py;
    `applied`, a JVM LongAccumulator, counts its transactions as they are loaded).

    The input has INPUT_SCHEMA's columns and may carry pass-through columns (RAW_PREFIX +
    ...). Besides its decisions the stage emits every input row once as a row of kind
    KIND_LAND holding those columns (streams/ingest/land_rows.py): the batch's records reach the
    writer through the stage, so the query reads Kafka once.
    """
    spark = stage_rows.sparkSession
    stage = spark._jvm.txcoord.Stage  # type: ignore[union-attr]
    spec = stage_spec(rules, output_schema(stage_rows.schema))
    if initial is None:
        return DataFrame(stage.decisions(stage_rows._jdf, spec), spark)
    # A new checkpoint takes the session's partition count (streams/state/rebuild.py sets it).
    partitions = int(str(spark.conf.get(PARTITIONS_CONF)))
    start = initial_chunks(initial, partitions)._jdf
    return DataFrame(stage.decisions(stage_rows._jdf, spec, start, applied), spark)


#: How many chunks each of the stage's partitions takes its initial state in.
CHUNKS_PER_PARTITION = 1024


def initial_chunks(initial: DataFrame, partitions: int) -> DataFrame:
    """Return the state rows of `initial` as chunks, one row each: the key of one of its
    transactions (its representative), then `chunk`, a JSON document (as bytes) of the stage
    partition they all belong to and their states: {"partition": p, "states":
    [{producer_group, transaction_id, state}, ...]}.

    Spark generates the code that turns an initial-state row into objects once per key
    (TransformWithStateExec.processInitialStateRows): two thirds of the CPU of loading 10^6
    transactions one per key (profiled). In chunks it is paid once per chunk. A
    chunk reaches the task of its representative's partition; every member belongs to the
    same one, because the chunk is formed from transactions of one partition by the very
    function Spark routes keys with (HashPartitioning: pmod(murmur3 hash of the key, N)).
    """
    fields = [name for name in initial.columns if name not in KEY]
    member = F.struct(*[F.col(k) for k in KEY], F.struct(*fields).alias("state"))
    partition = F.pmod(F.hash(*KEY), F.lit(partitions))
    chunk = F.pmod(F.xxhash64(*KEY), F.lit(CHUNKS_PER_PARTITION))
    chunks = initial.groupBy(partition.alias("partition"), chunk.alias("chunk")).agg(
        F.min(F.struct(*KEY)).alias("representative"),
        F.collect_list(member).alias("states"),
    )
    document = F.to_json(F.struct("partition", "states")).cast("binary").alias("chunk")
    return chunks.select(*[f"representative.{k}" for k in KEY], document)


def state_schema(spark: SparkSession) -> StructType:
    """Return the layout of one transaction's state in the stage (StageRows.STATE)."""
    stage_rows = spark._jvm.txcoord.StageRows  # type: ignore[union-attr]
    schema: StructType = StructType.fromJson(json.loads(stage_rows.stateJson()))
    return schema
