"""LAND rows: a micro-batch's raw ingress records, riding with the stage's decisions.

A streaming query has one sink. The coordinator reads the Kafka ingress topics itself and
must land every half and op in Delta before it decides on them (contract 1), in the same
micro-batch. So every parsed record (streams/ingest/transforms.py `parse`) enters the stateful stage
with its columns copied under RAW_PREFIX (`pass_through`), and the stage emits it once more
as a row of kind LAND holding those columns (txcoord.Landing, streams/jvm/), beside its
decisions. The writer (streams/query/batch_writer.py) lands those (streams/ingest/landing_query.py)
and then writes the decisions. The query reads each Kafka record once: a batch's records
and its decisions always match, and no body is fetched twice.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from streams.ingest.landing_query import Census, census_of
from streams.writes.arrow_rows import of_kind

#: The `kind` of the rows that carry the batch's ingress records to the writer, to be landed.
KIND_LAND = "LAND"
#: Prefix of the ingress-record columns of LAND rows (the Kafka source's own names after it).
RAW_PREFIX = "in_"


#: Parsed columns only a quarantined record lands (system/quarantine keeps the raw record):
#: a valid one passes them as NULL. Its headers are most of a record's bytes (the txcoord.*
#: names and values), and every byte passed through crosses the stage's shuffle and the
#: batch's Arrow collect.
QUARANTINE_ONLY = ("key", "headers")


def pass_through(parsed: DataFrame) -> list[Column]:
    """Return every column of `parsed` under RAW_PREFIX, for the stage to hand back as LAND;
    QUARANTINE_ONLY columns only for an invalid record (`reason` not NULL)."""
    invalid = F.col("reason").isNotNull()
    return [
        (F.when(invalid, F.col(name)) if name in QUARANTINE_ONLY else F.col(name)).alias(
            RAW_PREFIX + name
        )
        for name in parsed.columns
    ]


def landed_records(out: pa.Table) -> pa.Table:
    """Return the parsed ingress records (streams/ingest/transforms.py's `parse`) of the LAND rows
    of a batch collected as Arrow."""
    land = of_kind(out, KIND_LAND)
    raw = [name for name in out.column_names if name.startswith(RAW_PREFIX)]
    return land.select(raw).rename_columns([name.removeprefix(RAW_PREFIX) for name in raw])


def landing_census(summary: list[Row]) -> Census:
    """Return the `census` of a batch's LAND rows, from a summary grouped by
    `census_keys(RAW_PREFIX)` (among other columns)."""
    return census_of([row for row in summary if row.kind == KIND_LAND], RAW_PREFIX)
