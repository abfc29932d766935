"""Write rows into the warehouse's real tables with deltalake (their Spark schemas, as Arrow)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake
from pyspark.sql import types as T

from coordinator.protocol.deliveries import delta_rs_location
from delta_tables.table import TableSpec


def arrow_type(kind: T.DataType) -> pa.DataType:
    """Return the Arrow type Delta stores a Spark type as."""
    simple: dict[type[T.DataType], pa.DataType] = {
        T.StringType: pa.string(), T.IntegerType: pa.int32(), T.LongType: pa.int64(),
        T.BinaryType: pa.binary(), T.BooleanType: pa.bool_(),
        T.TimestampType: pa.timestamp("us", tz="UTC"),
    }  # fmt: skip
    if type(kind) in simple:
        return simple[type(kind)]
    if isinstance(kind, T.ArrayType):
        return pa.list_(arrow_type(kind.elementType))
    if isinstance(kind, T.MapType):
        return pa.map_(arrow_type(kind.keyType), arrow_type(kind.valueType))
    raise TypeError(f"no Arrow type for {kind}")


def arrow_schema(schema: T.StructType) -> pa.Schema:
    """Return the Arrow schema of a table's Spark schema, nullability included."""
    return pa.schema([pa.field(f.name, arrow_type(f.dataType), f.nullable) for f in schema])


def append(warehouse: Path | str, table: TableSpec, rows: list[dict[str, Any]]) -> None:
    """Append `rows` (every column given) to `table` under `warehouse` (a folder, or an
    `s3a://` location, which delta-rs names `s3://`)."""
    data = pa.Table.from_pylist(rows, schema=arrow_schema(table.schema))
    write_deltalake(delta_rs_location(table.path(str(warehouse))), data, mode="append")
