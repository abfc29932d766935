"""What every table module declares, and how a table is created when absent."""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urlparse

from delta.tables import DeltaTable
from deltalake import DeltaTable as RustDeltaTable
from deltalake import Schema as RustSchema
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from coordinator.core.config import StreamsConfig
from coordinator.protocol.deliveries import table_location
from delta_tables.object_store import S3_SCHEMES, filesystem, listing

log = logging.getLogger(__name__)

#: How long a table keeps its log's commit files (time travel, and readers that fall
#: behind), and the files a commit removed (VACUUM): `streams.log_retention`, set by
#: `retention_properties` here and delta_tables/log_retention.py.
LOG_RETENTION_PROPERTY = "delta.logRetentionDuration"
REMOVED_FILES_PROPERTY = "delta.deletedFileRetentionDuration"
#: Removed files are kept at most this long (Delta's default); never longer than the log,
#: as Spark's Delta requires.
REMOVED_FILES_RETENTION = timedelta(days=7)

#: Properties of every table besides its retention.
COMMON_PROPERTIES: Mapping[str, str] = {
    # A checkpoint rewrites the table's whole file list, at Delta's default every 10
    # commits, i.e. every 10 batches of a stream. Every 100 keeps log replay short
    # (at most 99 small JSON files) and takes that cost off 9 batches in 10.
    "delta.checkpointInterval": "100",
}


#: A commit file of a Delta log: its version, zero-padded to 20 digits.
COMMIT_FILE = re.compile(r"^(\d{20})\.json$")

_INTERVAL = re.compile(r"^\s*interval\s+(\d+)\s+(week|day|hour|minute|second)s?\s*$", re.I)
_UNITS = (("weeks", 7 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60), ("seconds", 1))


def parse_interval(text: str | None) -> timedelta | None:
    """Return a Delta interval property ("interval 1 week") as a timedelta; None if unreadable."""
    match = _INTERVAL.match(text or "")
    if match is None:
        return None
    return timedelta(**{f"{match.group(2).lower()}s": int(match.group(1))})


def spark_table_properties(spark: SparkSession, location: str) -> dict[str, str]:
    """Return the properties of the Delta table at `location`, as Spark's Delta reads them."""
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{location}`").first()
    return dict((detail["properties"] if detail is not None else None) or {})


def retention_properties(log_retention: timedelta) -> dict[str, str]:
    """Return the properties that keep a table's log for `log_retention` (and removed
    files as long, up to REMOVED_FILES_RETENTION)."""
    return {
        LOG_RETENTION_PROPERTY: interval_property(log_retention),
        REMOVED_FILES_PROPERTY: interval_property(min(log_retention, REMOVED_FILES_RETENTION)),
    }


def interval_property(duration: timedelta) -> str:
    """Return `duration` as a Delta interval property in its largest whole unit ("interval 1
    hours"), a form Spark's Delta and delta-rs both read; fractions of a second are dropped."""
    seconds = int(duration.total_seconds())
    unit, size = next((u, s) for u, s in _UNITS if seconds % s == 0)
    return f"interval {seconds // size} {unit}"


def local_directory(location: str) -> str | None:
    """Return `location` as a directory of this machine's filesystem, None if remote."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme else location
    return None


def delta_rs_uri(location: str) -> str | None:
    """Return `location` as delta-rs writes it: a local directory, or an `s3://` URI for an
    S3 API (`s3a://` is Hadoop's name; endpoint and credentials come from the standard AWS_*
    environment variables). None where only Spark writes (any other Hadoop scheme)."""
    directory = local_directory(location)
    if directory is not None:
        return directory
    if location.startswith(S3_SCHEMES):
        return "s3://" + location.split("://", 1)[1]
    return None


def listed_version(directory: str) -> int | None:
    """Return the newest commit file's version in the table `directory`'s log, None if none.

    The log's file names say it, without loading the table (which costs a cold process about
    a third of a second per table). `directory` may be on an S3 API (`s3a://`) too.
    """
    if directory.startswith(S3_SCHEMES):
        fs, table = filesystem(directory)
        names = [info.base_name for info in listing(fs, f"{table}/_delta_log")]
    else:
        try:
            names = os.listdir(os.path.join(directory, "_delta_log"))
        except FileNotFoundError:
            return None
    versions = [int(found.group(1)) for name in names if (found := COMMIT_FILE.match(name))]
    return max(versions, default=None)


def table_path(warehouse: str, name: str) -> str:
    """Return the location of table `name` ("system/half_messages") under `warehouse`."""
    return table_location(warehouse, name)


@dataclass(frozen=True)
class TableSpec:
    """A Delta table of the warehouse: where it lives, its columns and its properties."""

    name: str
    schema: StructType
    description: str
    properties: Mapping[str, str] = field(default_factory=dict)
    #: The columns Delta keeps min/max statistics of, for data skipping: the ones readers
    #: filter on. Delta's default (the first 32 columns, bodies included) costs every small
    #: append on the coordinator's path a large share of its time.
    stats_columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = {f.name for f in self.schema}
        unknown = [column for column in self.stats_columns if column not in names]
        if not self.stats_columns or unknown:
            raise ValueError(f"{self.name}: stats_columns must name its columns, not {unknown}")

    def path(self, warehouse: str) -> str:
        """Return this table's location under `warehouse`."""
        return table_path(warehouse, self.name)

    def configuration(self, log_retention: timedelta) -> dict[str, str]:
        """Return the table properties it is created with (Spark's or delta-rs's creation)."""
        own = {
            "delta.dataSkippingStatsColumns": ",".join(self.stats_columns),
            **retention_properties(log_retention),
        }
        return {**COMMON_PROPERTIES, **own, **self.properties}

    def create_if_absent(
        self,
        spark: SparkSession,
        warehouse: str,
        log_retention: timedelta = StreamsConfig.log_retention,
    ) -> str:
        """Create the table (empty) unless it exists, keeping its log's commit files for
        `log_retention`; return its location."""
        location = self.path(warehouse)
        self.create_at(spark, location, log_retention)
        return location

    def create_at(self, spark: SparkSession, location: str, log_retention: timedelta) -> None:
        """Create the table (empty) at `location` unless it exists (`create_if_absent`).

        On this machine's disk or an S3 API delta-rs creates it: one commit file written
        by the driver. Spark's creation runs jobs that read the new log back, which on a
        cluster's executors (cold JVMs, the first jobs of the application) made the cluster
        profile's first start minutes long (docs/deployment.md). Any other Hadoop file
        system: Spark's Delta.
        """
        local = local_directory(location)
        if local is not None and listed_version(local) is not None:
            return  # a committed table: nothing to create, no need to load it
        if local is not None and os.path.isdir(os.path.join(local, "_delta_log")):
            # A creation killed before its first commit: a log without a commit is no
            # table, and Delta would refuse to create one over it.
            shutil.rmtree(os.path.join(local, "_delta_log"))
        uri = delta_rs_uri(location)
        if uri is not None:
            if local is None and listed_version(location) is not None:
                return
            RustDeltaTable.create(
                uri,
                # Spark's schema JSON is the Delta log's own schema format.
                schema=RustSchema.from_json(self.schema.json()),
                mode="ignore",  # another process created it meanwhile: theirs stands
                description=self.description,
                configuration=self.configuration(log_retention),
            )
            log.debug("table %s ready at %s", self.name, location)
            return
        builder = (
            DeltaTable.createIfNotExists(spark)
            .location(location)
            .addColumns(self.schema)
            .comment(self.description)
        )
        for key, value in self.configuration(log_retention).items():
            builder = builder.property(key, value)
        builder.execute()
        log.debug("table %s ready at %s", self.name, location)
