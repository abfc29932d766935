"""LAND rows: a micro-batch's raw ingress records, riding with the stage's decisions.

A streaming query has one sink. The coordinator reads the Kafka ingress topics itself and
must land every half and op in Delta before it decides on them (SPEC 1), in the same
micro-batch. So its output is the union of the stage's rows and the batch's raw records,
the latter as rows of kind LAND whose `in_*` columns are the parsed records
(streams/ingest.py `parse`).
The writer (streams/coordinator_writer.py) lands those (streams/ingest_job.py) and then
writes the decisions. Both parts of the union read the same source with the same offsets:
Spark plans one source per query, so a batch's records and its decisions always match.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from streams.arrow_rows import of_kind
from streams.coordinator_stage import OUTPUT_SCHEMA
from streams.ingest_job import Census, census_of

#: The `kind` of the rows that carry the batch's ingress records to the writer, to be landed.
KIND_LAND = "LAND"
#: Prefix of the ingress-record columns of LAND rows (the Kafka source's own names after it).
RAW_PREFIX = "in_"


def with_landing(decided: DataFrame, parsed: DataFrame) -> DataFrame:
    """Return the stage's rows and, as rows of kind LAND, the batch's parsed ingress records.

    `parsed` is streams/ingest.py's `parse` of the Kafka source. A query has one sink: the
    writer receives both in one frame, lands the records (streams/ingest_job.py) and then
    writes the decisions, in the same micro-batch.
    """
    raw = {field.name: field.dataType for field in parsed.schema}
    decisions_part = decided.select(
        "*", *[F.lit(None).cast(kind).alias(RAW_PREFIX + name) for name, kind in raw.items()]
    )
    landing = parsed.select(
        *[
            F.lit(KIND_LAND).alias(field.name)
            if field.name == "kind"
            else F.lit(None).cast(field.dataType).alias(field.name)
            for field in OUTPUT_SCHEMA
        ],
        *[F.col(name).alias(RAW_PREFIX + name) for name in raw],
    )
    return decisions_part.unionByName(landing)


def landed_records(out: pa.Table) -> pa.Table:
    """Return the parsed ingress records (streams/ingest.py's `parse`) of the LAND rows of
    a batch collected as Arrow."""
    land = of_kind(out, KIND_LAND)
    raw = [name for name in out.column_names if name.startswith(RAW_PREFIX)]
    return land.select(raw).rename_columns([name.removeprefix(RAW_PREFIX) for name in raw])


def landing_census(summary: list[Row]) -> Census:
    """Return the `census` of a batch's LAND rows, from a summary grouped by
    `census_keys(RAW_PREFIX)` (among other columns)."""
    return census_of([row for row in summary if row.kind == KIND_LAND], RAW_PREFIX)
