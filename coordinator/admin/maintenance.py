"""Table maintenance: OPTIMIZE (compaction) and VACUUM, never removing what a stream needs.

What each table may get:

- `system/half_messages` and `system/op_records` are read as streams by the coordinator,
  one ingest commit at a time. They are VACUUMed but never compacted: a compacted file
  mixes the store times of many batches, and a coordinator started from a fresh checkpoint
  would read those in one piece, behind its watermark (SPEC 7.5).
- every other table (check requests, outcomes, verdicts, quarantine, queue offsets, every
  `topics/<topic>`) is compacted, then VACUUMed.

VACUUM deletes the files that the newest version no longer references and that were
removed longer ago than the retention. A stream that is behind still reads files of older
versions, so for a streamed table the retention is raised to cover the oldest version its
reader has not finished (read from the coordinator's checkpoint: the `reservoirVersion` of
each Delta source in the newest offsets file), plus `SAFETY_MARGIN`. The requested retention
defaults to Delta's own (7 days), which also protects readers we do not know of, such as an
analyst's stream over a topic table.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import SparkSession

from coordinator.config import Config
from delta_tables import half_messages, op_records
from delta_tables.registry import SYSTEM_TABLES
from streams.coordinator_job import checkpoint_of

log = logging.getLogger(__name__)

#: Delta's default retention (delta.deletedFileRetentionDuration).
DEFAULT_RETENTION = timedelta(days=7)
#: Extra time kept beyond the oldest version a stream still needs.
SAFETY_MARGIN = timedelta(hours=1)
#: Never less: a writer's files are in the table folder before its commit names them, and
#: VACUUM would take a running writer's uncommitted files for garbage.
MIN_RETENTION = timedelta(hours=1)
#: Tables the coordinator reads as streams: vacuumed with care, never compacted.
STREAMED = (half_messages.TABLE.name, op_records.TABLE.name)


@dataclass(frozen=True)
class TableReport:
    """What maintenance did to one table."""

    name: str
    optimized: bool
    files_before: int
    files_after: int
    retention_hours: int
    vacuumed_files: int
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


def needed_retention(
    requested: timedelta, needed_since: datetime | None, now: datetime
) -> timedelta:
    """Return the retention to use: the requested one, raised to cover `needed_since`."""
    if requested < MIN_RETENTION:
        raise ValueError(f"the retention must be at least {MIN_RETENTION}, not {requested}")
    if needed_since is None:
        return requested
    return max(requested, now - needed_since + SAFETY_MARGIN)


def _hours(retention: timedelta) -> int:
    return max(math.ceil(retention.total_seconds() / 3600), 0)


class Maintenance:
    """OPTIMIZE and VACUUM the warehouse's tables through Spark SQL."""

    def __init__(self, spark: SparkSession, config: Config) -> None:
        self.spark, self.config = spark, config

    def tables(self) -> list[str]:
        """Return every table of the warehouse: the system tables, then the topics."""
        names = [spec.name for spec in SYSTEM_TABLES]
        topics = Path(self.config.warehouse) / "topics"
        if topics.is_dir():
            names += sorted(f"topics/{p.name}" for p in topics.iterdir()
                            if (p / "_delta_log").is_dir())  # fmt: skip
        return [n for n in names if (Path(self.config.warehouse) / n / "_delta_log").is_dir()]

    def _path(self, name: str) -> str:
        return f"{self.config.warehouse.rstrip('/')}/{name}"

    def _files(self, name: str) -> int:
        detail = self.spark.sql(f"DESCRIBE DETAIL delta.`{self._path(name)}`").first()
        return int(detail["numFiles"]) if detail is not None else 0

    def _needed_since(self, name: str) -> datetime | None:
        """Return the commit time of the oldest version the coordinator still has to read."""
        if name not in STREAMED:
            return None
        detail = self.spark.sql(f"DESCRIBE DETAIL delta.`{self._path(name)}`").first()
        table_id = detail["id"] if detail is not None else None
        version = stream_positions(Path(checkpoint_of(self.config))).get(str(table_id))
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

    def run(
        self,
        retention: timedelta = DEFAULT_RETENTION,
        optimize: bool = True,
        vacuum: bool = True,
        progress: Callable[[str], None] = log.info,
    ) -> Iterator[TableReport]:
        """Maintain every table, yielding a report per table as it finishes."""
        # Our own bound replaces Delta's fixed 7-day check, which refuses shorter retentions.
        self.spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        for name in self.tables():
            progress(f"{name}: maintaining")
            before = self._files(name)
            compact = optimize and name not in STREAMED
            if compact:
                self.spark.sql(f"OPTIMIZE delta.`{self._path(name)}`").collect()
            keep = needed_retention(retention, self._needed_since(name), datetime.now(UTC))
            if name in STREAMED and "://" in self.config.streams.checkpoint_dir:
                keep = max(keep, DEFAULT_RETENTION)  # a remote checkpoint is not read here
            hours = _hours(keep)
            vacuumed = 0
            if vacuum:
                rows = self.spark.sql(
                    f"VACUUM delta.`{self._path(name)}` RETAIN {hours} HOURS DRY RUN"
                ).collect()
                vacuumed = len(rows)
                if vacuumed:
                    self.spark.sql(f"VACUUM delta.`{self._path(name)}` RETAIN {hours} HOURS")
            note = "streamed by the coordinator: not compacted" if name in STREAMED else ""
            if keep > retention:
                note = (note + "; " if note else "") + "retention raised for the coordinator"
            yield TableReport(name, compact, before, self._files(name), hours, vacuumed, note)
