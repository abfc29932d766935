"""contract 3: a transaction is (producer group, transaction id), end to end on the real stack.

Two groups use the same transaction id; each gets its own, complete lifecycle and nothing
one sends reaches the other: one commits, the other is checked and rolls back, and an op of
a group that sent no half with that id is that group's orphan.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from tests.harness import TOPIC, Engine, Producer, Responder, table, wait_for
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(
        transaction_timeout="3s",
        transaction_check_interval="12s",
        transaction_check_max="3",
        **{"streams.trigger_interval": "1s", "streams.tick_interval": "1s"},
    )


def rows(spark: SparkSession, config: Config, name: str) -> list[Any]:
    return table(spark, config, name).collect()


def test_two_groups_with_the_same_transaction_id_never_touch(
    spark: SparkSession, config: Config, engine: Engine
) -> None:
    payments = Responder(config, lambda request: "ROLLBACK", group="payments")
    orders = Responder(config, lambda request: "COMMIT", group="orders")  # must never be asked
    producer = Producer(config)
    try:
        producer.half("shared")  # orders, first: the half that used to win
        producer.flush()
        producer.half("shared", group="payments", body=b"payments-only")
        producer.flush()
        producer.op("shared", "COMMIT")  # orders' commit decides orders' transaction only
        producer.half("lone")
        producer.op("lone", "COMMIT", group="payments")  # payments sent no half "lone"
        producer.flush()
        producer.op("lone", "ROLLBACK")
        producer.flush()

        seen: list[Any] = []

        def settled() -> bool:
            finals = {
                (r.producer_group, r.transaction_id, r.state)
                for r in rows(spark, config, "system/transactions")
            }
            verdicts = {
                (r.producer_group, r.transaction_id, r.op, r.verdict)
                for r in rows(spark, config, "system/op_verdicts")
            }
            seen[:] = [finals, verdicts]
            orphans = [v for v in verdicts if v[3] == "ORPHAN"]
            return (
                ("payments", "shared", "ROLLED_BACK") in finals
                and len(finals) >= 3
                and (bool(orphans))
            )

        try:
            wait_for(settled, 480, "both groups' transactions to end and the orphan to be judged")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last seen finals, verdicts: {seen}") from None
    finally:
        producer.close()
        payments.stop()
        orders.stop()

    finals = sorted(
        (r.producer_group, r.transaction_id, r.state, r.reason)
        for r in rows(spark, config, "system/transactions")
    )
    assert finals == [
        ("orders", "lone", "ROLLED_BACK", "op"),
        ("orders", "shared", "COMMITTED", "op"),
        ("payments", "shared", "ROLLED_BACK", "check"),
    ]
    delivered = rows(spark, config, f"topics/{TOPIC}")
    assert [(r.producer_group, r.transaction_id, bytes(r.body)) for r in delivered] == [
        ("orders", "shared", b"body-shared")
    ]
    # Only payments' half was ever checked, with its own body; orders was never asked.
    checks = rows(spark, config, "system/check_requests")
    assert checks and {(r.producer_group, r.transaction_id, bytes(r.body)) for r in checks} == {
        ("payments", "shared", b"payments-only")
    }
    assert orders.requests == []
    assert payments.requests and {r["transaction_id"] for r in payments.requests} == {"shared"}
    verdicts = sorted(
        (r.producer_group, r.transaction_id, r.op, r.verdict)
        for r in rows(spark, config, "system/op_verdicts")
    )
    assert ("payments", "lone", "COMMIT", "ORPHAN") in verdicts
    # A second check answered before the first answer landed gives a duplicate, nothing else.
    others = {v for v in verdicts if v[3] != "APPLIED"}
    assert others <= {
        ("payments", "lone", "COMMIT", "ORPHAN"),
        ("payments", "shared", "ROLLBACK", "DUPLICATE"),
    }, verdicts
    assert {v for v in verdicts if v[3] == "APPLIED"} == {
        ("orders", "lone", "ROLLBACK", "APPLIED"),
        ("orders", "shared", "COMMIT", "APPLIED"),
        ("payments", "shared", "ROLLBACK", "APPLIED"),
    }
    discarded = rows(spark, config, "system/discarded")
    assert discarded == []


def test_every_table_that_names_a_transaction_names_its_group() -> None:
    """A reader finds a transaction by (group, id) in each of them (the REST lookup does)."""
    from delta_tables import (  # noqa: PLC0415
        check_requests,
        discarded,
        half_messages,
        op_records,
        op_verdicts,
        topics,
        transactions,
    )

    specs = [
        check_requests.TABLE,
        discarded.TABLE,
        half_messages.TABLE,
        op_records.TABLE,
        op_verdicts.TABLE,
        transactions.TABLE,
        topics.table("OrderPaid"),
    ]
    for spec in specs:
        assert {"producer_group", "transaction_id"} <= set(spec.schema.fieldNames()), spec.name
