"""Table maintenance: OPTIMIZE (compaction) and VACUUM, never removing what a stream needs.

What each table may get:

- every table is compacted, then VACUUMed. A compaction commits with dataChange = false,
  which a Delta stream reader (a notebook, a downstream job) skips: it reads every row once.
- `system/half_messages` and `system/op_records`, the landed input, are VACUUMed with care:
  the coordinator itself reads the ingress topics in Kafka, not these tables, but a
  checkpoint of an earlier version that streamed them still names their versions, and
  those are kept (below).

VACUUM deletes the files that the newest version no longer references and that were
removed longer ago than the table's `delta.deletedFileRetentionDuration` (as long as the
table keeps its log, `streams.log_retention`, up to a week: delta_tables/log_retention.py).
Delta 4 honours only that table property (a `RETAIN n HOURS` other than 0 is ignored), so
the retention is the table's own. A stream that is behind still reads files of older
versions: a streamed table is vacuumed only when its retention covers the oldest
version the coordinator's checkpoint may still read (the `reservoirVersion` of its Delta
sources in the offsets files) plus `SAFETY_MARGIN`; otherwise it is skipped, and says why.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from deltalake import DeltaTable as RustDeltaTable
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from delta_tables.object_store import S3_SCHEMES
from delta_tables.registry import STREAMED, warehouse_tables
from delta_tables.table import (
    REMOVED_FILES_PROPERTY,
    delta_rs_uri,
    parse_interval,
    spark_table_properties,
)
from streams.query.decision_query import checkpoint_of

log = logging.getLogger(__name__)

#: Delta's default retention (delta.deletedFileRetentionDuration).
DEFAULT_RETENTION = timedelta(days=7)
RETENTION_PROPERTY = REMOVED_FILES_PROPERTY
#: Extra time kept beyond the oldest version a stream still needs.
SAFETY_MARGIN = timedelta(hours=1)


@dataclass(frozen=True)
class TableReport:
    """What maintenance did to one table."""

    name: str
    optimized: bool
    files_before: int
    files_after: int
    retention_hours: int
    vacuumed: bool
    note: str = ""


def stream_positions(checkpoint: Path) -> dict[str, int]:
    """Return {Delta table id: a version no newer than any the stream may still read}.

    Each offsets file names, for each Delta source, a version (`reservoirVersion`) a batch
    reads up to; the next batch starts there. The smallest over every offsets file the
    checkpoint keeps (Spark keeps the last 100) is at or before the oldest version the
    stream may still read, whether the newest batch committed or not: a safe bound.
    """
    offsets = checkpoint / "offsets"
    positions: dict[str, int] = {}
    files = [p for p in offsets.iterdir() if p.name.isdigit()] if offsets.is_dir() else []
    for path in files:
        for line in path.read_text().splitlines()[2:]:  # "v1", batch metadata, sources
            try:
                source = json.loads(line)
            except ValueError:
                continue
            if isinstance(source, dict) and "reservoirId" in source:
                table_id, version = source["reservoirId"], int(source["reservoirVersion"])
                positions[table_id] = min(version, positions.get(table_id, version))
    return positions


def vacuum_refusal(
    retention: timedelta | None, needed_since: datetime | None, now: datetime
) -> str | None:
    """Return why a table must not be vacuumed now, or None when it is safe."""
    if retention is None:
        return f"{RETENTION_PROPERTY} is not a plain interval: not vacuumed"
    if needed_since is not None and retention < now - needed_since + SAFETY_MARGIN:
        return (
            f"not vacuumed: the coordinator may still read files of {needed_since:%Y-%m-%d %H:%M}"
            f" and the table keeps removed files only {retention}"
        )
    return None


def _hours(retention: timedelta) -> int:
    return max(math.ceil(retention.total_seconds() / 3600), 0)


#: Spark's setting that sizes VACUUM's file listing, and its default: one task per
#: directory up to 10,000 tasks, which on a small cluster (or local[2]) lists a table of a
#: few files in ten thousand empty tasks, a minute or more per table.
LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
SPARK_DEFAULT_LISTING_PARALLELISM = "10000"


@contextmanager
def listing_parallelism(spark: SparkSession) -> Iterator[None]:
    """Size VACUUM's listing to the cluster (4 tasks per core), unless the user set it."""
    conf = spark.conf
    configured = conf.get(LISTING_PARALLELISM, SPARK_DEFAULT_LISTING_PARALLELISM)
    if configured != SPARK_DEFAULT_LISTING_PARALLELISM:
        yield
        return
    conf.set(LISTING_PARALLELISM, str(4 * spark.sparkContext.defaultParallelism))
    try:
        yield
    finally:
        conf.unset(LISTING_PARALLELISM)


class Maintenance:
    """OPTIMIZE and VACUUM the warehouse's tables through Spark SQL."""

    def __init__(self, spark: SparkSession, config: Config) -> None:
        self.spark, self.config = spark, config

    def tables(self) -> list[str]:
        """Return every table of the warehouse: the system tables, then the topics."""
        return warehouse_tables(self.config.warehouse)

    def _path(self, name: str) -> str:
        return f"{self.config.warehouse.rstrip('/')}/{name}"

    def _on_s3(self, name: str) -> str | None:
        """Return table `name`'s URI for delta-rs if it is on an S3 API, else None.

        There the coordinator commits with delta-rs, whose conditional PUT makes a commit
        fail rather than overwrite another; Spark's commit on S3 is a plain PUT, which could
        overwrite a batch's commit made at the same moment. So maintenance commits with
        delta-rs there too, and a running coordinator is safe beside it.
        """
        location = self._path(name)
        return delta_rs_uri(location) if location.startswith(S3_SCHEMES) else None

    def _compact(self, name: str) -> None:
        if (uri := self._on_s3(name)) is not None:
            RustDeltaTable(uri).optimize.compact()
        else:
            self.spark.sql(f"OPTIMIZE delta.`{self._path(name)}`").collect()

    def _vacuum(self, name: str) -> None:
        if (uri := self._on_s3(name)) is not None:
            # The table's own deletedFileRetentionDuration, enforced, as Spark's VACUUM.
            RustDeltaTable(uri).vacuum(dry_run=False)
            return
        with listing_parallelism(self.spark):
            self.spark.sql(f"VACUUM delta.`{self._path(name)}`").collect()

    def _files(self, name: str) -> int:
        detail = self.spark.sql(f"DESCRIBE DETAIL delta.`{self._path(name)}`").first()
        return int(detail["numFiles"]) if detail is not None else 0

    def _needed_since(self, name: str) -> datetime | None:
        """Return the commit time of the oldest version the coordinator still has to read."""
        if name not in STREAMED:
            return None
        detail = self.spark.sql(f"DESCRIBE DETAIL delta.`{self._path(name)}`").first()
        table_id = detail["id"] if detail is not None else None
        version = stream_positions(Path(checkpoint_of(self.config, self.spark))).get(str(table_id))
        if version is None:
            return None
        commit = (
            self.spark.sql(f"DESCRIBE HISTORY delta.`{self._path(name)}`")
            .where(f"version >= {version}")
            .orderBy("version")
            .first()
        )
        if commit is None:  # the stream is at the end: nothing older is needed
            return None
        moment: datetime = commit["timestamp"]
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment

    def _retention(self, name: str) -> timedelta | None:
        properties = spark_table_properties(self.spark, self._path(name))
        if RETENTION_PROPERTY not in properties:
            return DEFAULT_RETENTION
        return parse_interval(properties[RETENTION_PROPERTY])

    def run(
        self,
        optimize: bool = True,
        vacuum: bool = True,
        tables: list[str] | None = None,
        progress: Callable[[str], None] = log.info,
    ) -> Iterator[TableReport]:
        """Maintain every table (or `tables`), yielding a report per table as it finishes."""
        for name in tables or self.tables():
            progress(f"{name}: maintaining")
            before = self._files(name)
            compact = optimize
            if compact:
                self._compact(name)
            retention = self._retention(name)
            refusal = vacuum_refusal(retention, self._needed_since(name), datetime.now(UTC))
            if name in STREAMED and "://" in self.config.streams.checkpoint_dir:
                refusal = "not vacuumed: the coordinator's checkpoint is remote, not read here"
            notes: list[str] = []
            vacuumed = False
            if vacuum and refusal is None:
                self._vacuum(name)
                vacuumed = True
            elif vacuum and refusal is not None:
                notes.append(refusal)
            yield TableReport(
                name,
                compact,
                before,
                self._files(name),
                _hours(retention or timedelta(0)),
                vacuumed,
                "; ".join(notes),
            )
