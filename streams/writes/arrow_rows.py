"""A micro-batch's rows as Arrow, shaped for its Delta tables in the driver.

The coordinator's foreachBatch collects its batch once (`DataFrame.toArrow`: the stateful
stage runs, its rows and the landed records come back as one Arrow table) and shapes every
table's rows from it here, with Arrow's vectorised kernels: no further Spark job per table.
Each Spark job has a fixed cost whatever its rows (task scheduling, closures, code
generated again whenever a per-batch literal such as the batch id changes its plan), and a
batch wrote up to nine tables, so those jobs, not the rows, set the batch's time
(docs/performance.md, decisions).

Every projection ends in the Delta table's own schema (`project`), so what is appended is
checked against the table module's declaration (delta_tables/), column by column.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Row
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

__all__ = [
    "TIMESTAMP",
    "arrow_schema",
    "constant",
    "number_in_queues",
    "of_kind",
    "project",
    "summary",
    "timestamps",
]

#: Delta timestamps are UTC instants with microseconds.
TIMESTAMP = pa.timestamp("us", tz="UTC")


@cache
def _arrow_schema(schema_json: str) -> pa.Schema:
    return to_arrow_schema(StructType.fromJson(json.loads(schema_json)), timezone="UTC")


def arrow_schema(schema: StructType) -> pa.Schema:
    """Return the Arrow schema of a table's Spark schema (timestamps in UTC)."""
    return _arrow_schema(schema.json())


def timestamps(millis: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Return epoch milliseconds as Delta timestamps (nulls stay null)."""
    return pc.cast(pc.cast(millis, pa.int64()), pa.timestamp("ms", tz="UTC")).cast(TIMESTAMP)


def constant(value: Any, kind: pa.DataType, rows: int) -> pa.Array:
    """Return `value` repeated `rows` times (the batch id, a landing time, a kind)."""
    return pa.array([value] * rows, kind) if rows else pa.array([], kind)


def of_kind(table: pa.Table, kind: str, column: str = "kind") -> pa.Table:
    """Return the rows of `table` whose `column` is `kind`."""
    return table.filter(pc.equal(table[column], kind))


def project(
    table: pa.Table,
    schema: StructType,
    computed: Mapping[str, Any] | None = None,
    renamed: Mapping[str, str] | None = None,
) -> pa.Table:
    """Return `table`'s rows in the columns of `schema` (a Delta table's), in its order.

    A column is `computed[name]` (an array, or a scalar repeated), else `table`'s column
    `renamed.get(name, name)`; each is cast to the table's type.
    """
    target = arrow_schema(schema)
    computed, renamed = computed or {}, renamed or {}
    columns = []
    for field in target:
        if field.name in computed:
            value = computed[field.name]
            if not isinstance(value, pa.Array | pa.ChunkedArray):
                value = constant(value, field.type, table.num_rows)
        else:
            value = table[renamed.get(field.name, field.name)]
        columns.append(value.cast(field.type) if value.type != field.type else value)
    return pa.Table.from_arrays(columns, schema=target)


def number_in_queues(
    rows: pa.Table, next_offsets: Mapping[tuple[str, int], int], order: Sequence[str]
) -> pa.Table:
    """Return `rows` with `queue_offset`: each (topic, queue_id)'s next offset, then on by one
    in the order of `order` (Spark's ascending order: nulls first)."""
    keys = ["topic", "queue_id", *order]
    ordered = rows.take(pc.sort_indices(rows, [(key, "ascending", "at_start") for key in keys]))
    count = ordered.num_rows
    if count == 0:
        return ordered.append_column("queue_offset", pa.array([], pa.int64()))
    topic = (
        pc.dictionary_encode(ordered["topic"])
        .combine_chunks()
        .indices.to_numpy(zero_copy_only=False)
    )
    queue = ordered["queue_id"].to_numpy()
    starts = np.ones(count, dtype=bool)
    starts[1:] = (topic[1:] != topic[:-1]) | (queue[1:] != queue[:-1])
    first = np.flatnonzero(starts)
    lengths = np.diff(np.append(first, count))
    topics, queues = ordered["topic"].to_pylist(), queue.tolist()
    base = np.array([next_offsets.get((topics[i], queues[i]), 0) for i in first], np.int64)
    rank = np.arange(count) - np.repeat(first, lengths)
    return ordered.append_column("queue_offset", pa.array(np.repeat(base, lengths) + rank))


def summary(
    table: pa.Table, keys: Mapping[str, Any], sums: Mapping[str, Any], maxima: Mapping[str, Any]
) -> list[Row]:
    """Return `table` grouped by `keys` (name -> array), as Rows with a "count" and, per
    name of `sums` / `maxima` (name -> array), that array's sum / max within the group."""
    names = [*keys, *sums, *maxima]
    values = {**keys, **sums, **maxima}
    grouped = pa.table({name: values[name] for name in names}).group_by(
        list(keys), use_threads=False
    )
    aggregated = grouped.aggregate(
        [([], "count_all")] + [(name, "sum") for name in sums] + [(name, "max") for name in maxima]
    )
    rename = {
        "count_all": "count",
        **{f"{name}_sum": name for name in sums},
        **{f"{name}_max": name for name in maxima},
    }
    return [
        Row(**{rename.get(name, name): value for name, value in row.items()})
        for row in aggregated.to_pylist()
    ]
