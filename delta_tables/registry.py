"""All system tables, created together before any stream starts."""

from __future__ import annotations

from pyspark.sql import SparkSession

from delta_tables import (
    check_requests,
    discarded,
    half_messages,
    op_records,
    op_verdicts,
    quarantine,
    queue_offsets,
    transactions,
)
from delta_tables.table import TableSpec

SYSTEM_TABLES: tuple[TableSpec, ...] = (
    half_messages.TABLE,
    op_records.TABLE,
    quarantine.TABLE,
    check_requests.TABLE,
    transactions.TABLE,
    discarded.TABLE,
    op_verdicts.TABLE,
    queue_offsets.TABLE,
)


def create_system_tables(spark: SparkSession, warehouse: str) -> dict[str, str]:
    """Create every system table that does not exist yet; return {name: location}."""
    return {table.name: table.create_if_absent(spark, warehouse) for table in SYSTEM_TABLES}
