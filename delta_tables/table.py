"""What every table module declares, and how a table is created when absent."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlparse

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

#: Properties of every table. Streams commit about once a second, so the log grows by
#: ~86,000 commits a day per table: keep a week of history (time travel in the notebooks)
#: instead of Delta's 30 days.
COMMON_PROPERTIES: Mapping[str, str] = {
    "delta.logRetentionDuration": "interval 7 days",
    "delta.deletedFileRetentionDuration": "interval 7 days",
    # A checkpoint rewrites the table's whole file list, at Delta's default every 10
    # commits, i.e. every 10 batches of a stream. Every 100 keeps log replay short
    # (at most 99 small JSON files) and takes that cost off 9 batches in 10.
    "delta.checkpointInterval": "100",
}


#: A commit file of a Delta log: its version, zero-padded to 20 digits.
COMMIT_FILE = re.compile(r"^(\d{20})\.json$")


def local_directory(location: str) -> str | None:
    """Return `location` as a directory of this machine's filesystem, None if remote."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme else location
    return None


def listed_version(directory: str) -> int | None:
    """Return the newest commit file's version in the table `directory`'s log, None if none.

    The log's file names say it, without loading the table (which costs a cold process about
    a third of a second per table).
    """
    try:
        names = os.listdir(os.path.join(directory, "_delta_log"))
    except FileNotFoundError:
        return None
    versions = [int(found.group(1)) for name in names if (found := COMMIT_FILE.match(name))]
    return max(versions, default=None)


def table_path(warehouse: str, name: str) -> str:
    """Return the location of table `name` ("system/half_messages") under `warehouse`."""
    return f"{warehouse.rstrip('/')}/{name}"


@dataclass(frozen=True)
class TableSpec:
    """A Delta table of the warehouse: where it lives, its columns and its properties."""

    name: str
    schema: StructType
    description: str
    properties: Mapping[str, str] = field(default_factory=dict)
    #: The columns Delta keeps min/max statistics of, for data skipping: the ones readers
    #: filter on. Delta's default (the first 32 columns, bodies included) costs every small
    #: append on the coordinator's path a large share of its time (issue 13).
    stats_columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = {f.name for f in self.schema}
        unknown = [column for column in self.stats_columns if column not in names]
        if not self.stats_columns or unknown:
            raise ValueError(f"{self.name}: stats_columns must name its columns, not {unknown}")

    def path(self, warehouse: str) -> str:
        """Return this table's location under `warehouse`."""
        return table_path(warehouse, self.name)

    def create_if_absent(self, spark: SparkSession, warehouse: str) -> str:
        """Create the table (empty) unless it exists; return its location."""
        location = self.path(warehouse)
        local = local_directory(location)
        if local is not None and listed_version(local) is not None:
            return location  # a committed table: nothing to create, no need to load it
        builder = (
            DeltaTable.createIfNotExists(spark)
            .location(location)
            .addColumns(self.schema)
            .comment(self.description)
        )
        stats = {"delta.dataSkippingStatsColumns": ",".join(self.stats_columns)}
        for key, value in {**COMMON_PROPERTIES, **stats, **self.properties}.items():
            builder = builder.property(key, value)
        builder.execute()
        log.debug("table %s ready at %s", self.name, location)
        return location
