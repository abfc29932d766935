"""Every rule of contract 3, end to end through Kafka, the ingest and the coordinator."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from tests.harness import TOPIC, Engine, Producer, Responder, table, wait_for, wait_past
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

TIMEOUT_S = 3
#: Well above the natural first-check delay (the timeout, then skew + a tick + two batches:
#: a few seconds), so a check that honours the immunity is told apart from one that ignored it.
IMMUNITY_S = 30
#: User properties and tags travel with the half to delivery and to check requests.
PROPERTIES = {"order": "o-1", "region": "eu-west"}
TAGS = "TagA || paid"
#: How each transaction's check requests are answered (None: not at all).
ANSWERS = {
    "late": "UNKNOWN",
    "immune": "COMMIT",
    "immune-low": "COMMIT",
    "immune-bad": "ROLLBACK",
}


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(
        transaction_timeout=f"{TIMEOUT_S}s",
        # 'late' is discarded three intervals after its first check; the checked ones are
        # answered (an answer decides if it is stored before the discard is due).
        transaction_check_interval="6s",
        transaction_check_max="3",
        **{"streams.trigger_interval": "1s", "streams.tick_interval": "1s"},
    )


def rows(spark: SparkSession, config: Config, name: str) -> list[Any]:
    return table(spark, config, name).collect()


def landed(spark: SparkSession, config: Config, name: str, tx: str) -> list[Any]:
    """Return the rows of landing table `name` (system/half_messages, op_records) of `tx`."""
    return [r for r in rows(spark, config, name) if r.transaction_id == tx]


def produce_every_case(spark: SparkSession, config: Config, engine: Engine) -> None:
    """Send one transaction per rule; return when every one of them has settled."""
    responder = Responder(config, lambda request: ANSWERS.get(request["transaction_id"]))
    producer = Producer(config)
    try:
        # An op from another group decides nothing (that group sent no half with this id:
        # it is that group's orphan); the right group's op decides.
        producer.half("wrong-group")
        producer.op("wrong-group", "COMMIT", group="payments")
        producer.flush()
        producer.op("wrong-group", "ROLLBACK")
        # First decisive op wins; later ones are recorded as duplicate and conflict.
        producer.half("dup-conflict", properties=PROPERTIES, tags=TAGS)
        for op in ("COMMIT", "COMMIT", "ROLLBACK"):
            producer.op("dup-conflict", op)
            producer.flush()  # one by one: store times in this order
        # UNKNOWN from the producer changes nothing; a COMMIT after it still commits.
        producer.half("unknown-then-commit")
        producer.op("unknown-then-commit", "UNKNOWN")
        producer.flush()
        producer.op("unknown-then-commit", "COMMIT")
        # An op may arrive before its half (a later batch lands the half): the half is sent
        # once the op has landed, i.e. once the batch that read the op is done.
        producer.op("op-first", "COMMIT")
        producer.flush()
        wait_for(
            lambda: bool(landed(spark, config, "system/op_records", "op-first")),
            240,
            "the op of 'op-first' to land before its half",
        )
        producer.half("op-first")
        # An op whose half never comes: an orphan, deciding nothing.
        producer.op("orphan", "COMMIT")
        # Immunity delays the first check; too small a value or 0 (none) means the timeout.
        # (An unparsable one is quarantined: tests/streams/ingest/test_ingest.py.)
        producer.half("immune", immunity=str(IMMUNITY_S), properties=PROPERTIES, tags=TAGS)
        producer.half("immune-low", immunity="1")
        producer.half("immune-bad", immunity="0")
        # Never answered but UNKNOWN: discarded after check_max; a later op is LATE.
        producer.half("late")
        producer.flush()

        def discarded() -> bool:
            return any(r.transaction_id == "late" for r in rows(spark, config, "system/discarded"))

        wait_for(discarded, 240, "'late' to be discarded")
        producer.op("late", "COMMIT")
        producer.flush()

        def settled() -> bool:
            verdicts = {
                (r.transaction_id, r.op, r.verdict)
                for r in rows(spark, config, "system/op_verdicts")
            }
            finals = {r.transaction_id for r in rows(spark, config, "system/transactions")}
            wanted = {
                ("late", "COMMIT", "LATE"),
                ("orphan", "COMMIT", "ORPHAN"),
                ("wrong-group", "COMMIT", "ORPHAN"),
            }
            return wanted <= verdicts and len(finals) >= 8

        wait_for(settled, 240, "every transaction to settle")
        # A check wrongly sent after a decision or the discard would be due within a check
        # interval of the last one: once the engine's event time is past that, it would show.
        due = time.time() + config.transaction_check_interval.total_seconds()
        wait_past(engine, due, 240, "one check interval after the last decision")
    finally:
        producer.close()
        responder.stop()


def test_lifecycle_rules_end_to_end(spark: SparkSession, config: Config, engine: Engine) -> None:
    produce_every_case(spark, config, engine)
    # The op of 'op-first' landed before its half was stored: two batches, as the case needs.
    (op,) = landed(spark, config, "system/op_records", "op-first")
    (half,) = landed(spark, config, "system/half_messages", "op-first")
    assert half.stored_at > op.ingested_at, (op, half)

    finals = [
        (r.transaction_id, r.state, r.reason) for r in rows(spark, config, "system/transactions")
    ]
    timeline = sorted(
        (r.transaction_id, r.check_number, str(r.prepared_at), str(r.requested_at))
        for r in rows(spark, config, "system/check_requests")
    )
    assert sorted(finals) == [  # one final state each (contract 7.3)
        ("dup-conflict", "COMMITTED", "op"),
        ("immune", "COMMITTED", "check"),
        ("immune-bad", "ROLLED_BACK", "check"),
        ("immune-low", "COMMITTED", "check"),
        ("late", "DISCARDED", "check_max"),
        ("op-first", "COMMITTED", "op"),
        ("unknown-then-commit", "COMMITTED", "op"),
        ("wrong-group", "ROLLED_BACK", "op"),
    ], timeline

    requests = rows(spark, config, "system/check_requests")
    verdicts = sorted(
        (r.transaction_id, r.op, r.producer_group, r.verdict)
        for r in rows(spark, config, "system/op_verdicts")
        if not r.transaction_id.startswith("immune")
        and (r.transaction_id, r.op) != ("late", "UNKNOWN")
    )
    # The UNKNOWN answers to the three checks: no effect, or late if the discard came first.
    unknowns = [
        r.verdict
        for r in rows(spark, config, "system/op_verdicts")
        if (r.transaction_id, r.op) == ("late", "UNKNOWN")
    ]
    assert len(unknowns) == 3 and set(unknowns) <= {"NO_EFFECT", "LATE"}, unknowns
    assert verdicts == [
        ("dup-conflict", "COMMIT", "orders", "APPLIED"),
        ("dup-conflict", "COMMIT", "orders", "DUPLICATE"),
        ("dup-conflict", "ROLLBACK", "orders", "CONFLICT"),
        ("late", "COMMIT", "orders", "LATE"),
        ("op-first", "COMMIT", "orders", "APPLIED"),
        ("orphan", "COMMIT", "orders", "ORPHAN"),
        ("unknown-then-commit", "COMMIT", "orders", "APPLIED"),
        ("unknown-then-commit", "UNKNOWN", "orders", "NO_EFFECT"),
        ("wrong-group", "COMMIT", "payments", "ORPHAN"),
        ("wrong-group", "ROLLBACK", "orders", "APPLIED"),
    ]

    # Committed bodies exactly once; rolled back, discarded and orphaned never (contract 7.2).
    visible = sorted(r.transaction_id for r in rows(spark, config, f"topics/{TOPIC}"))
    assert visible == ["dup-conflict", "immune", "immune-low", "op-first", "unknown-then-commit"]
    delivered = {r.transaction_id: r for r in rows(spark, config, f"topics/{TOPIC}")}
    assert delivered["dup-conflict"].properties == PROPERTIES
    assert delivered["immune"].properties == PROPERTIES
    assert delivered["op-first"].properties == {}
    # The whole message is restored: its tags and keys too (the tags were once dropped).
    assert (delivered["dup-conflict"].tags, delivered["immune"].tags) == (TAGS, TAGS)
    assert delivered["op-first"].tags is None
    assert delivered["immune"].keys == ["immune"] and delivered["immune"].body == b"body-immune"
    reader = DeltaTable(f"{config.warehouse}/topics/{TOPIC}").to_pyarrow_table()
    assert sorted(reader.column("transaction_id").to_pylist()) == visible

    # Checks: only for the transactions nobody decided; immunity honoured, never below T.
    assert all(
        (r.properties, r.tags) == (PROPERTIES, TAGS)
        for r in requests
        if r.transaction_id == "immune"
    )
    checks = Counter(r.transaction_id for r in requests)
    assert checks.pop("late") == 3, checks
    # How many an answered one gets depends on the answer's round trip (machine speed); none
    # may follow its decision (contract 7.6).
    assert set(checks) == {"immune", "immune-low", "immune-bad"}, checks
    resolved = {r.transaction_id: r.resolved_at for r in rows(spark, config, "system/transactions")}
    assert [r for r in requests if r.requested_at > resolved[r.transaction_id]] == []
    waited = {
        r.transaction_id: (r.requested_at - r.prepared_at).total_seconds()
        for r in requests
        if r.check_number == 1
    }
    assert waited["immune"] >= IMMUNITY_S, waited
    assert min(waited.values()) >= TIMEOUT_S, waited
    assert waited["immune-low"] < IMMUNITY_S and waited["immune-bad"] < IMMUNITY_S, waited
