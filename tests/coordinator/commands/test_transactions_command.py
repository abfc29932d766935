"""`txcoord transactions`: operator commands against the real streams, broker and tables."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result
from pyspark.sql import SparkSession

from coordinator.cli import main
from coordinator.core.config import Config
from tests.harness import TOPIC, Engine, Producer, Responder, table, wait_for
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

#: How the group's check listener answers, per transaction (None: not at all).
ANSWERS: dict[str, str | None] = {"stuck": "UNKNOWN", "held": None}


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(
        transaction_timeout="2s",
        # One check, then DISCARDED an interval later: the interval must outlast a check's
        # lag and the answer's round trip (check topic -> listener -> op topic), or the
        # answer to the resumed check is stored after a second discard is due. The check
        # goes out when its batch ends, and a loaded machine's batch takes seconds.
        transaction_check_interval="20s",
        transaction_check_max="1",
        **{"streams.trigger_interval": "1s", "streams.tick_interval": "1s"},
    )


def txcoord(config: Config, *args: str) -> Result:
    """Run `txcoord transactions ...` in this process, against the test's broker and tables."""
    where = [
        "--warehouse", config.warehouse,
        "--bootstrap-servers", config.kafka.bootstrap_servers,
        "--set", f"kafka.op_topic={config.kafka.op_topic}",
    ]  # fmt: skip
    return CliRunner().invoke(main, ["transactions", *args, *where], catch_exceptions=False)


def states(config: Config, *args: str) -> dict[str, dict[str, Any]]:
    result = txcoord(config, *args, "--json")
    assert result.exit_code == 0, result.output
    return {s["transaction_id"]: s for s in json.loads(result.output)}


def final(spark: SparkSession, config: Config, tx: str) -> list[tuple[str, str]]:
    """Return the (state, reason) rows system/transactions holds for `tx`, oldest first."""
    rows = table(spark, config, "system/transactions").where(f"transaction_id = '{tx}'")
    return [(r.state, r.reason) for r in rows.orderBy("resolved_at").collect()]


def test_operators_list_find_describe_commit_rollback_and_resume(
    spark: SparkSession, config: Config, engine: Engine
) -> None:
    answers = dict(ANSWERS)
    responder = Responder(config, lambda request: answers.get(request["transaction_id"]))
    producer = Producer(config)
    try:
        producer.half("done")
        producer.op("done", "COMMIT")
        producer.half("stuck")  # UNKNOWN to its check: discarded after check_max = 1
        producer.half("held")  # never answered: discarded too
        producer.half("hang", immunity="3600")  # not checked for an hour: PREPARED
        producer.op("no-operator", "RESUME")  # RESUME without an operator: quarantined
        producer.flush()

        def discarded() -> bool:
            return {"stuck", "held"} <= {
                r.transaction_id for r in table(spark, config, "system/discarded").collect()
            }

        wait_for(discarded, 300, "'stuck' and 'held' to be discarded")
        reasons = [r.reason for r in table(spark, config, "system/quarantine").collect()]
        assert any("RESUME is an operator's op" in r for r in reasons), reasons

        known = states(config, "list")
        assert {tx: s["state"] for tx, s in known.items()} == {
            "done": "COMMITTED", "stuck": "DISCARDED", "held": "DISCARDED", "hang": "PREPARED",
        }  # fmt: skip
        only_discarded = states(config, "list", "--state", "DISCARDED")
        assert sorted(only_discarded) == ["held", "stuck"]
        assert sorted(states(config, "find-hanging", "--older-than", "1s")) == ["hang"]
        assert states(config, "find-hanging", "--older-than", "1h") == {}

        # What would change nothing is refused before anything is sent.
        refused = txcoord(config, "commit", "done", "--reason", "again")
        assert refused.exit_code == 1 and "is COMMITTED" in refused.output, refused.output
        refused = txcoord(config, "resume", "hang", "--reason", "not discarded")
        assert refused.exit_code == 1 and "is PREPARED" in refused.output, refused.output
        unknown = txcoord(config, "describe", "never-sent")
        assert unknown.exit_code == 1 and "unknown transaction" in unknown.output

        # RESUME: checked again from check #1; this time the producer knows the answer.
        answers["stuck"] = "COMMIT"
        resumed = txcoord(
            config,
            "resume",
            "stuck",
            "--operator",
            "bob",
            "--reason",
            "producer fixed",
            "--wait",
            "240",
        )
        assert resumed.exit_code == 0, resumed.output
        assert "verdict: APPLIED" in resumed.output
        committed = txcoord(
            config,
            "commit",
            "held",
            "--operator",
            "alice",
            "--reason",
            "paid by phone",
            "--wait",
            "240",
        )
        assert committed.exit_code == 0, committed.output
        assert "held is now COMMITTED" in committed.output
        rolled = txcoord(
            config,
            "rollback",
            "hang",
            "--operator",
            "alice",
            "--reason",
            "order cancelled",
            "--wait",
            "240",
        )
        assert rolled.exit_code == 0, rolled.output
        assert "hang is now ROLLED_BACK" in rolled.output

        wait_for(
            lambda: final(spark, config, "stuck")[-1:] == [("COMMITTED", "check")],
            240,
            "the resumed transaction to commit on its check answer",
        )
    finally:
        producer.close()
        responder.stop()
    assert_recorded(spark, config)


def assert_recorded(spark: SparkSession, config: Config) -> None:
    """Check the tables and the commands' view after the operators acted."""
    assert final(spark, config, "stuck") == [("DISCARDED", "check_max"), ("COMMITTED", "check")]
    assert final(spark, config, "held") == [("DISCARDED", "check_max"), ("COMMITTED", "operator")]
    assert final(spark, config, "hang") == [("ROLLED_BACK", "operator")]
    assert final(spark, config, "done") == [("COMMITTED", "op")]
    checks = sorted(
        r.check_number
        for r in table(spark, config, "system/check_requests")
        .where("transaction_id = 'stuck'")
        .collect()
    )
    assert checks == [1, 1]  # one round before the discard, one after the resume
    delivered = sorted(r.transaction_id for r in table(spark, config, f"topics/{TOPIC}").collect())
    assert delivered == ["done", "held", "stuck"]

    # Who and why are recorded with each operator op; the refused ones were never sent.
    operator_ops = sorted(
        (r.transaction_id, r.op, r.operator, r.reason)
        for r in table(spark, config, "system/op_records").where("operator IS NOT NULL").collect()
    )
    assert operator_ops == [
        ("hang", "ROLLBACK", "alice", "order cancelled"),
        ("held", "COMMIT", "alice", "paid by phone"),
        ("stuck", "RESUME", "bob", "producer fixed"),
    ]
    after = states(config, "list")
    assert {tx: (s["state"], s["reason"]) for tx, s in after.items()} == {
        "done": ("COMMITTED", "op"), "stuck": ("COMMITTED", "check"),
        "held": ("COMMITTED", "operator"), "hang": ("ROLLED_BACK", "operator"),
    }  # fmt: skip
    described = txcoord(config, "describe", "held")
    assert described.exit_code == 0, described.output
    for line in (
        "state        COMMITTED (reason operator)",
        "COMMIT",
        "by operator alice (paid by phone)",
        "judged APPLIED",
        f"delivered to {TOPIC}/",
    ):
        assert line in described.output, described.output
