"""What the tables of a store-time run say about each transaction (test_store_time.py).

The run's timer settings are fixed here, with the story they are judged by: every time is
one the tables record (`stored_at`, `requested_at`, `resolved_at`, `discarded_at`) or a
check record's own timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from coordinator.core.config import Config
from tests.harness import TOPIC, Producer, Responder, count, table, wait_for

TIMEOUT, INTERVAL, CHECK_MAX = 3, 4, 3


@dataclass
class Story:
    """What the tables say about one transaction."""

    stored_at: datetime | None = None  # the half's
    checks: dict[int, datetime] = field(default_factory=dict)  # check number -> requested_at
    published: dict[int, datetime] = field(default_factory=dict)  # -> on the check topic at
    answers: list[tuple[datetime, str]] = field(default_factory=list)  # decisive ops, stored
    finals: list[Any] = field(default_factory=list)  # rows of system/transactions
    discarded_at: datetime | None = None
    delivered: int = 0
    verdicts: list[tuple[str, str]] = field(default_factory=list)  # (op, verdict)

    @property
    def requested(self) -> list[datetime]:
        """Return requested_at of checks 1, 2, ..., in check order."""
        return [self.checks[n] for n in sorted(self.checks)]

    @property
    def answered_at(self) -> datetime | None:
        """Return when the first decisive op was stored (the one that must win)."""
        return min(self.answers)[0] if self.answers else None

    def due(self, number: int) -> datetime:
        """Return when check `number` (CHECK_MAX + 1: the discard) is due, by the rules."""
        assert self.stored_at is not None
        if number == 1:
            return self.stored_at + timedelta(seconds=TIMEOUT)
        return self.checks[number - 1] + timedelta(seconds=INTERVAL)

    def sent_after_answer(self) -> list[int]:
        """Return the checks sent although an answer was stored before they were due."""
        answered = self.answered_at
        return [n for n in sorted(self.checks) if answered is not None and answered < self.due(n)]

    def state(self) -> str | None:
        return self.finals[-1].state if self.finals else None


def read_stories(
    spark: SparkSession, config: Config, published_ms: dict[tuple[str, int], int] | None = None
) -> dict[str, Story]:
    """Return what every table says, by transaction id, and when each check was published.

    `published_ms` is the responder's: the check records' own timestamps. Spark hands
    timestamps to Python as naive local times, so those are made naive local times too.
    """
    stories: dict[str, Story] = {}

    def story(tx: str) -> Story:
        return stories.setdefault(tx, Story())

    for r in table(spark, config, "system/half_messages").where("kind = 'HALF'").collect():
        story(r.transaction_id).stored_at = r.stored_at
    for r in table(spark, config, "system/op_records").where("kind = 'OP'").collect():
        if r.op in ("COMMIT", "ROLLBACK"):
            story(r.transaction_id).answers.append((r.stored_at, r.op))
    for r in table(spark, config, "system/check_requests").collect():
        checks = story(r.transaction_id).checks
        assert r.check_number not in checks, f"check {r.check_number} of {r.transaction_id} twice"
        checks[r.check_number] = r.requested_at
    for r in table(spark, config, "system/transactions").orderBy("resolved_at").collect():
        story(r.transaction_id).finals.append(r)
    for r in table(spark, config, "system/discarded").collect():
        story(r.transaction_id).discarded_at = r.discarded_at
    # The topic table is created by its first delivery: none yet, nothing delivered.
    if Path(config.warehouse, "topics", TOPIC, "_delta_log").is_dir():
        for r in table(spark, config, f"topics/{TOPIC}").collect():
            story(r.transaction_id).delivered += 1
    for r in table(spark, config, "system/op_verdicts").collect():
        story(r.transaction_id).verdicts.append((r.op, r.verdict))
    for (tx, number), ms in (published_ms or {}).items():
        story(tx).published[number] = datetime.fromtimestamp(ms / 1000)
    return {tx: s for tx, s in stories.items() if not tx.startswith(WARM_UP)}


#: The transactions of `warm_up_cycle` (their own producer group), left out of every story.
WARM_UP = "warm-up-"


def warm_up_cycle(spark: SparkSession, config: Config) -> None:
    """Run one committed and one checked transaction through the engine, and wait for both.

    A warm stack has done each kind of work once: the first delivery to a topic creates its
    table, and the first write of a fresh warehouse's table goes through Delta's own
    idempotence check (streams/writes/delta_writes.py). Those one-time costs (seconds) delayed
    every check due during them; a freshly started stack is measured by its own test above.
    """
    group = "warm-up"
    listener = Responder(config, lambda request: "COMMIT", group=group)
    producer = Producer(config)
    try:
        producer.half(f"{WARM_UP}commit", group=group)
        producer.op(f"{WARM_UP}commit", "COMMIT", group=group)
        producer.half(f"{WARM_UP}checked", group=group)
        producer.flush()
        wait_for(
            lambda: count(config, "system/transactions") >= 2,
            240,
            "the warm-up transactions to end",
        )
    finally:
        producer.close()
        listener.stop()


def seconds(later: datetime, earlier: datetime) -> float:
    return round((later - earlier).total_seconds(), 3)
