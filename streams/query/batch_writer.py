"""foreachBatch of the coordinator: the stateful stage's rows -> Delta tables and check topic.

Per micro-batch, the batch's records are landed (streams/ingest/landing_query.py) while three chains
run beside that (streams/writes/parallel_writes.py), each in its own order:

1. DELIVER rows get their queue offsets: the next offset of each (topic, queue) from
   `system/queue_offsets`, plus their rank in commit order (op store time, then op id),
   and are appended to `topics/<topic>`; then, beside the rest of this chain, the queues'
   new next offsets are appended to `system/queue_offsets` and announced to consumers on
   the deliveries topic (streams/kafka_io/delivery_notices.py, best effort). The writer keeps what
   it last wrote there and reads the table only after a start or a replayed batch. After the topic
   tables, FINAL rows go to `system/transactions` and then VERDICT rows to `system/op_verdicts`: a
   message is visible before its transaction reads COMMITTED, and an outcome before the verdict on
   its op;
2. CHECK rows go to `system/check_requests` and, at the same time, to the Kafka check topic;
3. DISCARD rows go to `system/discarded`.

Every Delta write is idempotent for this batch (streams/writes/delta_writes.py), and the rows are a
pure function of the batch (the stage's clock is the batch timestamp, which Spark records
with the batch's offsets). A replay after a crash at any point therefore writes each row
once: a table the first attempt reached skips the write, a table it did not reach gets the
same rows, and because the offsets table is written after the topic tables, a replay reads
the offsets the first attempt read and numbers the messages the same way.

The check topic is written at least once: a replay may send a check again, with the same
transaction id and check number, which the SDK ignores (streams/kafka_io/check_publisher.py).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from coordinator.core.config import Config
from coordinator.core.errors import WriterFencedError
from coordinator.core.failpoints import failpoint
from coordinator.core.state_machine import TransactionState as State
from coordinator.protocol.names import topic_name_problem
from delta_tables import (
    check_requests,
    discarded,
    known_topics,
    op_verdicts,
    queue_offsets,
    topics,
    transactions,
)
from delta_tables.registry import warehouse_tables
from delta_tables.table import TableSpec, table_path
from streams.ingest.land_rows import (
    KIND_LAND,
    RAW_PREFIX,
    landed_records,
    landing_census,
)
from streams.ingest.landing_query import IngestBatchWriter, census_keys
from streams.ingest.topic_admission import TopicAdmission
from streams.kafka_io.check_publisher import CheckPublisher
from streams.kafka_io.check_topic import check_record
from streams.kafka_io.delivery_notices import DeliveryNotices
from streams.kafka_io.tick_pace import TickPace
from streams.progress.step_timer import StepTimer
from streams.progress.tally import FINISH_BUCKETS_S, Tally
from streams.stage.lifecycle import Kind
from streams.writes.arrow_rows import (
    arrow_schema,
    number_in_queues,
    of_kind,
    project,
    summary,
    timestamps,
)
from streams.writes.batch_collect import collect
from streams.writes.batch_gate import BatchGate
from streams.writes.delta_writes import BatchLedger
from streams.writes.parallel_writes import Step, run_steps
from streams.writes.writer_fence import WriterFence

log = logging.getLogger(__name__)

__all__ = ["CoordinatorBatchWriter", "check_record"]  # check_record: the check topic's codec


def _summary(out: pa.Table) -> list[Row]:
    """Return what a batch holds, grouped: kinds and states, first checks and checked ends,
    deliveries per queue, finish-time buckets, and the landing's census."""
    delivered_or_not = pa.array([State.COMMITTED.name, State.ROLLED_BACK.name])
    finished = pc.and_(
        pc.equal(out["kind"], Kind.FINAL.value), pc.is_in(out["state"], delivered_or_not)
    )
    spent = pc.divide(pc.subtract(out["at_ms"], out["prepared_ms"]).cast(pa.float64()), 1000.0)
    seconds = pc.if_else(pc.fill_null(finished, False), spent, None)
    # FINISH_BUCKETS_S's index of the first bound at or above the seconds (last: +Inf).
    values = seconds.to_numpy(zero_copy_only=False)
    indices = np.searchsorted(np.array(FINISH_BUCKETS_S), np.nan_to_num(values), side="left")
    bucket = pa.array(indices.astype(np.int32), mask=np.isnan(values.astype(np.float64)))
    first = pc.or_kleene(pc.equal(out["check_number"], 1), pc.greater(out["check_count"], 0))
    keys = {
        "kind": out["kind"],
        "state": out["state"],
        "first": first,
        "topic": out["topic"],
        "queue_id": out["queue_id"],
        "bucket": bucket,
        **census_keys(out, RAW_PREFIX),
    }
    return summary(
        out, keys, {"seconds": seconds}, {"immunity": out[RAW_PREFIX + "check_immunity_seconds"]}
    )


@dataclass(frozen=True)
class Outcome:
    """How a batch writes one kind of outcome row: the table, each timestamp column and the
    rows' milliseconds it comes from, the columns renamed on the way, whether a missing
    check count is 0, and the failpoint right after the append."""

    table: TableSpec
    times: Mapping[str, str]
    failpoint: str
    renamed: Mapping[str, str] = field(default_factory=dict)
    counts_checks: bool = False


#: The outcome rows of a batch, each written to its table the same way.
OUTCOMES = {
    Kind.FINAL: Outcome(
        transactions.TABLE,
        {"prepared_at": "prepared_ms", "resolved_at": "at_ms"},
        failpoint="coordinator.after_transactions",
        counts_checks=True,
    ),
    Kind.DISCARD: Outcome(
        discarded.TABLE,
        {"prepared_at": "prepared_ms", "discarded_at": "at_ms"},
        failpoint="coordinator.after_discarded",
        counts_checks=True,
    ),
    Kind.VERDICT: Outcome(
        op_verdicts.TABLE,
        {"stored_at": "op_stored_ms", "recorded_at": "at_ms"},
        failpoint="coordinator.after_op_verdicts",
        renamed={"producer_group": "op_producer_group"},
    ),
}


#: The kinds a commit writes, in the order readers rely on (see `_commit_chain`).
COMMIT_CHAIN = (Kind.DELIVER, Kind.FINAL, Kind.VERDICT)


def _step_name(kinds: Sequence[Kind]) -> str:
    """Return a chain's step name for the timer's log line, e.g. "deliver+final+verdict"."""
    return "+".join(kind.value.lower() for kind in kinds)


class CoordinatorBatchWriter:
    """The foreachBatch function of the decision query."""

    def __init__(
        self,
        config: Config,
        app_id: str,
        tally: Tally | None = None,
        gate: BatchGate | None = None,
        lander: IngestBatchWriter | None = None,
        *,
        pace: TickPace | None = None,
        fence: WriterFence | None = None,
        admission: TopicAdmission | None = None,
        checks: CheckPublisher | None = None,
        notices: DeliveryNotices | None = None,
    ) -> None:
        self.config = config
        # The topic limits (streams/ingest/topic_admission.py): what each batch's ingest knows of
        # the warehouse's topics, set before the batch runs; None: no limit (auto-create off).
        self.admission = admission
        # The writer epoch every write carries (streams/writes/writer_fence.py); the error that
        # stopped this writer once a newer coordinator took over, for the engine to report.
        self.fence = fence
        self.fenced: WriterFencedError | None = None
        # Told when a batch may have set a timer, so that heartbeats keep coming until it is
        # due (streams/kafka_io/tick_pace.py).
        self.pace = pace
        # Lands the batch's ingress records (LAND rows) before any decision is written.
        self.lander = lander
        self.ledger = BatchLedger(app_id, fence)
        self.tally = tally or Tally()
        self.warehouse = config.warehouse
        # Lets an orderly stop wait for the batch in flight (streams/writes/batch_gate.py).
        self.gate = gate or BatchGate()
        self._topic_tables: set[str] = set()
        # The next free offset of every (topic, queue) as this writer last wrote it to
        # system/queue_offsets; None: read the table (after a start or a replay).
        self._next_offsets: dict[tuple[str, int], int] | None = None
        # Publishes each batch's checks on the check topics (streams/kafka_io/check_publisher.py).
        self.checks = checks or CheckPublisher(config)
        # Tells consumers which queues each batch moved (streams/kafka_io/delivery_notices.py).
        self.notices = notices or DeliveryNotices(config)
        # Fenced on Kafka, either asks the warehouse before it takes its id back
        # (streams/kafka_io/kafka_fence.py).
        self.checks.fence = self.notices.fence = fence

    def prepare(self, spark: SparkSession) -> None:
        """Do before the query starts what the first batch would otherwise do on its way.

        Each table's last batch (its history, read once per process), the queues' next
        offsets, the Kafka producers' transactional ids (taken already when the coordinator
        took them before its claim: streams/query/decision_query.py) and the first Delta append
        of the process would cost a first batch seconds, and delay its decisions by as much
        (a check due then would go out late).
        """
        timer = StepTimer()
        tables = [
            check_requests.TABLE,
            discarded.TABLE,
            op_verdicts.TABLE,
            queue_offsets.TABLE,
            transactions.TABLE,
        ]
        steps: list[Step] = [
            (spec.name, functools.partial(self.ledger.prime, spark, spec.path(self.warehouse)))
            for spec in tables
        ]
        steps.append(("queue offsets", functools.partial(self._read_next_offsets, spark)))
        if self.admission is not None:  # after the fence: no older writer adds rows meanwhile
            location = known_topics.TABLE.path(self.warehouse)
            steps.append(("known topics", self.admission.prepare))
            primed = functools.partial(self.ledger.prime, spark, location)
            steps.append(("known topics' batch", primed))
        steps.append(("check producer", self.checks.connect))
        steps.append(("notice producer", self.notices.connect))
        steps.append(("warm-up", functools.partial(self._warm_up, spark)))
        existing = warehouse_tables(self.warehouse)
        # Topic tables that exist need no creating (a first delivery would otherwise ask).
        self._topic_tables.update(
            name.removeprefix("topics/") for name in existing if name.startswith("topics/")
        )
        allowed = self.config.allowed_topics
        if allowed is not None and (outside := sorted(self._topic_tables - set(allowed))):
            log.warning(
                "auto_create_topic_enable is off and %d existing topic table(s) are not in "
                "`topics` (%s): halves naming them are refused from now on",
                len(outside),
                ", ".join(outside[:10]) + (", ..." if len(outside) > 10 else ""),
            )
        if self.lander is not None:
            steps += self.lander.prepare_steps(spark)
        if self.fence is not None:
            # First, alone: once every table carries this epoch no older writer can change
            # one, so what the steps read (each table's last batch, the queues' next
            # offsets) stays true. Read before, a coordinator still running would write on
            # behind them, and this one would number its first messages from stale offsets.
            locations = [table_path(self.warehouse, name) for name in existing]
            with timer.step("fence"):
                self.fence.fence_tables(locations)
        run_steps(spark, steps, timer)
        log.info("coordinator writer ready: %s", timer.summary())

    def _warm_up(self, spark: SparkSession) -> None:
        """Append one row to a scratch Delta table beside the checkpoint.

        The first Delta append of a process costs several times a later one (classes loaded,
        code generated and compiled), whatever the table: paid here, before the query
        starts, it does not delay the first batch's decisions.
        """
        scratch = f"{self.config.streams.checkpoint_dir.rstrip('/')}/writer-warm-up"
        row = spark.range(1).select(F.col("id"), F.current_timestamp().alias("at"))
        # The way every batch writes (streams/writes/delta_writes.py), as a writer of its own.
        BatchLedger(f"txcoord-warm-up-{uuid.uuid4()}").append(row, scratch, 0)

    def _read_next_offsets(self, spark: SparkSession) -> None:
        self._next_offsets = queue_offsets.read(spark, self.warehouse)

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        """Write one micro-batch of the stateful stage's output, unless the query is stopping."""
        try:
            with self.gate.batch(frame.sparkSession, batch_id):
                if self.fence is not None:  # a fenced writer stops before it decides anything
                    self.fence.notice()
                self.write(frame, batch_id)
        except WriterFencedError as exc:
            self.fenced = exc
            raise

    def write(self, frame: DataFrame, batch_id: int) -> None:
        """Write one micro-batch of the stateful stage's output."""
        timer = StepTimer()
        # The stateful part of the query (parse, stage) runs here, once (twice for a batch
        # too large for one job, streams/writes/batch_collect.py): the step "decide", whose rows
        # come back as Arrow; every table's rows are shaped from them in the driver
        # (streams/writes/arrow_rows.py), with no Spark job of their own.
        spark = frame.sparkSession
        if self.admission is not None:  # what the batch's ingest knows, before it runs
            self.admission.before_batch(batch_id)
        with timer.step("decide"):
            out = collect(frame)
        with timer.step("summary"):
            summary = _summary(out)
        counts: Counter[tuple[str, str | None, bool | None]] = Counter()
        for row in summary:
            counts[row.kind, row.state, row.first] += row["count"]
        present = {kind for kind, _, _ in counts}
        census = landing_census(summary)
        steps: list[Step] = []
        coverage = None
        if self.lander is not None:
            # Which ingress records the batch read, carried by each of its commits: its
            # decisions may commit before its landing does, and a rebuild from the warehouse
            # must know the batch to land the rest (streams/state/landing_repair.py).
            records = landed_records(out)
            coverage = self.lander.batch_coverage(spark, batch_id, records)
            self.ledger.note(batch_id, coverage.moved().metadata())
            if self.admission is not None:
                # Before anything else of the batch: a topic's table never exists without
                # its row (a replay tells its own rows by them, streams/ingest/topic_admission.py).
                with timer.step("known topics"):
                    self.admission.record(spark, records, batch_id, self.ledger)
        # Every record but a valid heartbeat is landed (heartbeats alone: nothing), in
        # this batch, beside its decisions: the batch ends only when both are written.
        if any(bad or not tick for _, bad, tick, _ in census):
            if self.lander is None:
                raise ValueError("a batch with ingress records to land, and no lander")
            steps.append(
                (
                    "land",
                    functools.partial(
                        self.lander.land_rows, spark, records, batch_id, census, coverage
                    ),
                )
            )
        # How many messages each (topic, queue) receives in this batch.
        delivered: Counter[tuple[str, int]] = Counter()
        for row in summary:
            if row.kind == Kind.DELIVER.value:
                delivered[row.topic, row.queue_id] += row["count"]
        # The landing and three chains side by side. In order within the first, because
        # readers rely on it: a message is in its topic table before its transaction
        # reads COMMITTED, and an outcome is recorded before the verdict on the op that
        # caused it (an operator's command waits for the verdict, then reads the outcome).
        if commits := [kind for kind in COMMIT_CHAIN if kind in present]:
            commit = functools.partial(
                self._commit_chain, spark, out, commits, batch_id, timer=timer, delivered=delivered
            )
            steps.append((_step_name(commits), commit))
        if Kind.CHECK in present:
            checks = of_kind(out, Kind.CHECK.value)
            steps.append(("check", functools.partial(self._check, spark, checks, batch_id, timer)))
        if Kind.DISCARD in present:
            discards = of_kind(out, Kind.DISCARD.value)
            discard = functools.partial(
                self._outcome, OUTCOMES[Kind.DISCARD], spark, discards, batch_id
            )
            steps.append(("discard", discard))
        if steps:
            run_steps(spark, steps, timer)
        failpoint("coordinator.after_batch")
        self._pace(summary, landed=any(not (bad or tick) for _, bad, tick, _ in census))
        self._count(counts)
        self._count_by_topic(summary)
        log.info("coordinator batch %d: %s", batch_id, timer.summary())

    def _pace(self, summary: list[Row], landed: bool) -> None:
        """Keep the heartbeats coming if this batch landed a valid record or decided anything.

        Either may have set a timer (streams/kafka_io/tick_pace.py); the longest immunity among the
        batch's halves may set one beyond the pace's horizon.
        """
        if self.pace is None:
            return
        if landed or any(row.kind != KIND_LAND for row in summary):
            immunity = max((row.immunity or 0 for row in summary), default=0)
            self.pace.saw_activity(timedelta(seconds=immunity))

    def _commit_chain(
        self,
        spark: SparkSession,
        out: pa.Table,
        kinds: Sequence[Kind],
        batch_id: int,
        *,
        timer: StepTimer,
        delivered: Counter[tuple[str, int]],
    ) -> None:
        """Write the batch's `kinds` of COMMIT_CHAIN: deliveries first; once the topic tables
        have them, their queues' new offsets, the notices and the outcomes side by side
        (nothing else waits for the offsets), final states before verdicts.

        `delivered`: how many messages each (topic, queue) receives.
        """
        outcomes = [kind for kind in kinds if kind is not Kind.DELIVER]
        if Kind.DELIVER not in kinds:
            self._outcomes(spark, out, outcomes, batch_id, timer)
            return
        with timer.step("deliver"):
            offsets, ends = self._deliver(
                spark, of_kind(out, Kind.DELIVER.value), batch_id, delivered
            )
        steps: list[Step] = [
            ("queue offsets", offsets),
            ("notices", functools.partial(self.notices.publish, batch_id, ends)),
        ]
        if outcomes:
            later = functools.partial(self._outcomes, spark, out, outcomes, batch_id, timer)
            steps.append((_step_name(outcomes), later))
        run_steps(spark, steps, timer)

    def _outcomes(
        self,
        spark: SparkSession,
        out: pa.Table,
        kinds: Sequence[Kind],
        batch_id: int,
        timer: StepTimer,
    ) -> None:
        """Append the rows of each of `kinds` (OUTCOMES) to its table, in order."""
        for kind in kinds:
            with timer.step(kind.value.lower()):
                self._outcome(OUTCOMES[kind], spark, of_kind(out, kind.value), batch_id)

    def _count(self, counts: dict[tuple[str, str | None, bool | None], int]) -> None:
        def total(kind: Kind, state: str | None = None, first: bool | None = None) -> int:
            return sum(
                n
                for (k, s, f), n in counts.items()
                if k == kind and state in (None, s) and first in (None, f)
            )

        self.tally.add(
            committed=total(Kind.FINAL, State.COMMITTED.name),
            rolled_back=total(Kind.FINAL, State.ROLLED_BACK.name),
            discarded=total(Kind.FINAL, State.DISCARDED.name),
            checks_sent=total(Kind.CHECK),
            first_checks=total(Kind.CHECK, first=True),
            finals_after_check=total(Kind.FINAL, first=True),
        )

    def _count_by_topic(self, summary: list[Row]) -> None:
        finals: Counter[str] = Counter()
        buckets: Counter[int] = Counter()
        seconds = 0.0
        for row in summary:
            if row.kind == Kind.FINAL.value and row.topic is not None:
                finals[row.topic] += row["count"]
            if row.bucket is not None:
                buckets[row.bucket] += row["count"]
                seconds += row.seconds or 0.0
        self.tally.add_by_topic(finals=finals)
        if buckets:
            self.tally.observe_finishes(buckets, seconds)

    def close(self) -> None:
        """Release the check and notice producers."""
        with contextlib.suppress(Exception):
            self.checks.close()
        with contextlib.suppress(Exception):
            self.notices.close()

    # -- deliveries ----------------------------------------------------------------------
    def _deliver(
        self, spark: SparkSession, rows: pa.Table, batch_id: int, counts: Counter[tuple[str, int]]
    ) -> tuple[Callable[[], None], dict[tuple[str, int], int]]:
        """Number and append the DELIVER `rows`: `counts` messages to each (topic, queue).

        Return what writes the queues' new next offsets, to be called once this returned,
        and those offsets.
        """
        rows, counts = deliverable(rows, counts)
        names = sorted({topic for topic, _ in counts})
        # A topic's table is created by its first append (`creating`), in one commit.
        new = {name for name in names if name not in self._topic_tables}
        offsets_path = queue_offsets.TABLE.path(self.warehouse)
        if self._next_offsets is None:  # after a start, or a replayed batch: the table says
            self._read_next_offsets(spark)
        before = self._next_offsets
        assert before is not None
        # Unknown again until this batch's offsets are in the table (a failure below must
        # not leave the writer numbering from offsets that were never written).
        self._next_offsets = None
        # Each queue's messages from its next offset on, in commit order (op store time,
        # then op id).
        numbered = number_in_queues(rows, before, ["op_stored_ms", "op_id"])
        delivered = project(
            numbered,
            topics.SCHEMA,
            {
                "prepared_at": timestamps(numbered["prepared_ms"]),
                "committed_at": timestamps(numbered["op_stored_ms"]),
                "delivered_at": timestamps(numbered["at_ms"]),
                "batch_id": batch_id,
            },
            renamed={"commit_op_id": "op_id"},
        )
        for name in names:
            table = topics.table(name)
            self.ledger.append(
                of_kind(delivered, name, "topic"),
                table.path(self.warehouse),
                batch_id,
                spark,
                creating=table if name in new else None,
                log_retention=self.config.streams.log_retention,
            )
            self._topic_tables.add(name)
            failpoint("coordinator.after_topic_append")
        # Each queue's messages are numbered from its next offset up, without gaps.
        moved = {queue: before.get(queue, 0) + n for queue, n in counts.items()}

        def write_offsets() -> None:
            updated = pa.Table.from_pylist(
                [
                    {"topic": topic, "queue_id": queue, "next_offset": offset, "batch_id": batch_id}
                    for (topic, queue), offset in sorted(moved.items())
                ],
                schema=arrow_schema(queue_offsets.SCHEMA),
            )
            wrote = self.ledger.append(updated, offsets_path, batch_id, spark)
            failpoint("coordinator.after_queue_offsets")
            # A replayed batch whose offsets were already written read them *after* itself:
            # its numbers went unused (every write was skipped), so do not keep them.
            self._next_offsets = {**before, **moved} if wrote else None

        return write_offsets, moved

    # -- checks --------------------------------------------------------------------------
    def _check(self, spark: SparkSession, rows: pa.Table, batch_id: int, timer: StepTimer) -> None:
        requests = project(
            rows,
            check_requests.SCHEMA,
            {
                "prepared_at": timestamps(rows["prepared_ms"]),
                "requested_at": timestamps(rows["at_ms"]),
                "batch_id": batch_id,
            },
        )

        def record() -> None:
            self.ledger.append(requests, check_requests.TABLE.path(self.warehouse), batch_id, spark)
            failpoint("coordinator.after_check_requests")

        # Side by side: a check goes out as soon as it can, and both are written again
        # when the batch is replayed (the check topic at least once).
        run_steps(
            spark,
            [("check requests", record), ("check topic", lambda: self.checks.send(rows, batch_id))],
            timer,
        )

    # -- outcomes ------------------------------------------------------------------------
    def _outcome(self, spec: Outcome, spark: SparkSession, rows: pa.Table, batch_id: int) -> None:
        """Append the outcome `rows` (final states, discards or verdicts) to `spec`'s table."""
        computed: dict[str, Any] = {
            column: timestamps(rows[source]) for column, source in spec.times.items()
        }
        if spec.counts_checks:  # a transaction never checked has no count yet: 0
            computed["check_count"] = pc.coalesce(rows["check_count"], pa.scalar(0, pa.int32()))
        computed["batch_id"] = batch_id
        outcome = project(rows, spec.table.schema, computed, renamed=spec.renamed)
        self.ledger.append(outcome, spec.table.path(self.warehouse), batch_id, spark)
        failpoint(spec.failpoint)


def deliverable(
    rows: pa.Table, counts: Counter[tuple[str, int]]
) -> tuple[pa.Table, Counter[tuple[str, int]]]:
    """Return the DELIVER `rows` and the per-queue `counts` whose topic is a topic name today.

    Ingest refuses every other name, so only a half landed by an earlier version (which took
    '%' and '|') can name one: no table path holds it safely (delta-rs decodes '%'), and
    raised inside the batch it stopped every batch, for good. Its message is not delivered;
    the error names each transaction (its half stays in system/half_messages).
    """
    bad = sorted({topic for topic, _ in counts if topic_name_problem(topic)})
    if not bad:
        return rows, counts
    refused = pc.is_in(rows["topic"], value_set=pa.array(bad, pa.string()))
    log.error(
        "not delivered, the topic is not a topic name (%s): transaction(s) %s",
        ", ".join(map(repr, bad)),
        ", ".join(rows.filter(refused)["transaction_id"].to_pylist()),
    )
    kept = Counter({queue: n for queue, n in counts.items() if queue[0] not in bad})
    return rows.filter(pc.invert(refused)), kept
