"""The tally's starting point: what the warehouse's tables hold, counted once at start.

The engine seeds its tally (streams/progress/tally.py) with these totals before the query starts, so
its counts survive restarts. Two readers give the same `Totals`:

- `read_totals` reads the few columns needed with `deltalake` (delta-rs, no JVM): a fraction
  of a second, and nothing for the JVM to warm up before the query can start. It reads a
  remote warehouse with the credentials delta-rs finds in the environment, as the REST
  ingress's lookups do (delta_tables/lookup.py);
- `spark_totals` asks Spark the same questions: the fallback when delta-rs cannot read the
  warehouse (a Hadoop filesystem it does not know, credentials only Hadoop's configuration
  holds, a table feature it does not support).

tests/coordinator/runtime/test_table_counts.py shows both agree on the same tables.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc
from deltalake import DeltaTable
from pyspark.sql import functions as F

from coordinator.core.config import Config
from coordinator.core.state_machine import TransactionState as State
from delta_tables import check_requests, half_messages, op_records, quarantine, transactions
from delta_tables.lookup import delta_uri
from delta_tables.table import TableSpec
from streams.progress.tally import Counts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

#: (state, checked at least once, topic) of `system/transactions`' rows.
FinalKey = tuple[str, bool | None, str]


@dataclass
class Totals:
    """The tables' row counts the tally starts from."""

    finals: Counter[FinalKey] = field(default_factory=Counter)
    halves_by_topic: Counter[str] = field(default_factory=Counter)
    ops: int = 0
    quarantined: int = 0
    checks: int = 0
    first_checks: int = 0

    def counts(self) -> Counts:
        """Return the tally these totals stand for."""

        def state(name: str) -> int:
            return sum(n for (s, _, _), n in self.finals.items() if s == name)

        finals_by_topic: Counter[str] = Counter()
        for (_, _, topic), n in self.finals.items():
            finals_by_topic[topic] += n
        return Counts(
            halves=sum(self.halves_by_topic.values()),
            halves_by_topic=Counter(self.halves_by_topic),
            finals_by_topic=finals_by_topic,
            ops=self.ops,
            quarantined=self.quarantined,
            committed=state(State.COMMITTED.name),
            rolled_back=state(State.ROLLED_BACK.name),
            discarded=state(State.DISCARDED.name),
            checks_sent=self.checks,
            first_checks=self.first_checks,
            finals_after_check=sum(n for (_, checked, _), n in self.finals.items() if checked),
        )


def table_counts(spark: SparkSession, config: Config) -> Counts:
    """Return the tally implied by the tables: delta-rs, or Spark where delta-rs cannot read."""
    try:
        return read_totals(config.warehouse).counts()
    except Exception as exc:
        log.info("counting the tables with Spark (delta-rs cannot read them: %s)", exc)
        return spark_totals(spark, config.warehouse).counts()


def read_totals(warehouse: str) -> Totals:
    """Return the totals, read with delta-rs (no JVM)."""

    def read(spec: TableSpec, columns: Sequence[str]) -> Any:  # a pyarrow Table
        return DeltaTable(delta_uri(warehouse, spec.name)).to_pyarrow_table(columns=list(columns))

    finals = read(transactions.TABLE, ["state", "check_count", "topic"])
    finals = finals.append_column("checked", pc.greater(finals["check_count"], 0))
    halves = read(half_messages.TABLE, ["kind", "topic"])
    halves = halves.filter(pc.equal(halves["kind"], half_messages.KIND_HALF))
    ops = read(op_records.TABLE, ["kind"])
    checks = read(check_requests.TABLE, ["check_number"])
    return Totals(
        finals=Counter(
            {
                (row["state"], row["checked"], row["topic"]): row["count_all"]
                for row in finals.group_by(["state", "checked", "topic"], use_threads=False)
                .aggregate([([], "count_all")])
                .to_pylist()
            }
        ),
        halves_by_topic=Counter(
            {
                row["topic"]: row["count_all"]
                for row in halves.group_by(["topic"], use_threads=False)
                .aggregate([([], "count_all")])
                .to_pylist()
            }
        ),
        ops=pc.sum(pc.equal(ops["kind"], op_records.KIND_OP)).as_py() or 0,
        quarantined=read(quarantine.TABLE, ["source_offset"]).num_rows,
        checks=checks.num_rows,
        first_checks=pc.sum(pc.equal(checks["check_number"], 1)).as_py() or 0,
    )


def spark_totals(spark: SparkSession, warehouse: str) -> Totals:
    """Return the totals, counted by Spark (Delta answers plain counts from its statistics)."""

    def read(spec: TableSpec) -> DataFrame:
        return spark.read.format("delta").load(spec.path(warehouse))

    checks = read(check_requests.TABLE)
    return Totals(
        finals=Counter(
            {
                (row.state, row.checked, row.topic): row["count"]
                for row in read(transactions.TABLE)
                .groupBy("state", (F.col("check_count") > 0).alias("checked"), "topic")
                .count()
                .collect()
            }
        ),
        halves_by_topic=Counter(
            {
                row.topic: row["count"]
                for row in read(half_messages.TABLE)
                .where(F.col("kind") == half_messages.KIND_HALF)
                .groupBy("topic")
                .count()
                .collect()
            }
        ),
        ops=read(op_records.TABLE).where(F.col("kind") == op_records.KIND_OP).count(),
        quarantined=read(quarantine.TABLE).count(),
        checks=checks.count(),
        first_checks=checks.where(F.col("check_number") == 1).count(),
    )
