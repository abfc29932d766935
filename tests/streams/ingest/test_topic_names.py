"""Names are names: a topic's messages are read back from its own table, and only there.

delta-rs and object_store percent-decode a table's path: an earlier version accepted '%' in
a topic name, and a topic "%2e%2e" wrote one folder and read another (the warehouse root:
the coordinator stopped, and every start failed again while fencing it); "%41" read
topics/A; on S3 "Payment%73" appended into topics/Payments. Through the Kafka ingress, with
the real engine: the known probes, case twins and a Hypothesis-drawn set of names over the
old alphabet and the path characters. Every name the protocol's rule accepts must be
delivered to `topics/<name>` alone; every other one is quarantined with its reason. Then a
table of such a name left by an earlier version must not stop a start: it is set aside.
"""

from __future__ import annotations

import logging
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from coordinator.protocol.names import topic_name_problem
from delta_tables import quarantine
from delta_tables.registry import warehouse_tables
from streams.query.batch_writer import deliverable
from tests.harness import Engine, Producer, wait_for
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

#: The probes of the issue: each once accepted, each addressing another path than its own.
PROBES = ["%41", "%2e", "%2e%2e", "a%2fb", "Payment%73", "..x", "x%20y", "a|b", "%", "A.b"]
#: Accepted names beside them: the decoded forms, and names that differ only in case.
ACCEPTED = ["A", "Payments", "Case", "case", "CASE", "x-y_z"]
#: The old alphabet and the characters a path or a URL gives meaning to.
DRAWN = st.lists(
    st.text(alphabet="Aab0_-%|./ 2e", min_size=1, max_size=6), min_size=12, max_size=12
)


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config()


@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
@given(drawn=DRAWN)
def test_every_accepted_name_is_delivered_to_its_own_table_only(
    spark: SparkSession, config: Config, drawn: list[str]
) -> None:
    names = list(dict.fromkeys(PROBES + ACCEPTED + drawn))
    accepted = [name for name in names if topic_name_problem(name) is None]
    refused = [name for name in names if name not in accepted]
    pass
    txs = {name: [f"{i}-{j}" for j in range(2)] for i, name in enumerate(names)}
    engine = Engine(spark, config)
    try:
        commit(config, txs)
        wait_for(lambda: delivered(config) == {n: sorted(txs[n]) for n in accepted}, 180,
                 "every accepted topic's messages in its own table")  # fmt: skip
        wait_for(lambda: len(quarantined(config)) == 2 * len(refused), 60,
                 "the refused topics' halves quarantined")  # fmt: skip
        assert {reason for reason in quarantined(config)} == {"real topic"}
    finally:
        engine.stop()

    # An earlier version's table under such a name (a copy of a real one) is set aside: the
    # start fenced every table it found, and this one failed it, every time.
    topics = Path(config.warehouse) / "topics"
    for name in ("%2e%2e", "%41", "a|b"):
        shutil.copytree(topics / "Payments", topics / name)
    assert not {"topics/%2e%2e", "topics/%41", "topics/a|b"} & set(
        warehouse_tables(config.warehouse)
    )
    engine = Engine(spark, config)
    try:
        commit(config, {"Payments": ["after-restart"]})
        expected = {**{n: sorted(txs[n]) for n in accepted}}
        expected["Payments"] = sorted([*txs["Payments"], "after-restart"])
        wait_for(lambda: delivered(config) == expected, 180,
                 "the next commit delivered after the restart")  # fmt: skip
    finally:
        engine.stop()


def commit(config: Config, txs: dict[str, list[str]]) -> None:
    """Send a half to each topic for each of its transactions, then commit them all."""
    producer = Producer(config)
    try:
        for topic, ids in txs.items():
            for tx in ids:
                producer.half(tx, topic=topic, queue_id=0)
        producer.flush()
        for ids in txs.values():
            for tx in ids:
                producer.op(tx, "COMMIT")
        producer.flush()
    finally:
        producer.close()


def delivered(config: Config) -> dict[str, list[str]]:
    """Return, per topic table that opens, the transactions of its rows; each row's topic
    must be its table's."""
    found: dict[str, list[str]] = {}
    for name in warehouse_tables(config.warehouse):
        if not name.startswith("topics/"):
            continue
        topic = name.removeprefix("topics/")
        rows = DeltaTable(f"{config.warehouse}/{name}").to_pyarrow_table().to_pylist()
        assert {row["topic"] for row in rows} <= {topic}, f"foreign rows in {name}"
        found[topic] = sorted(row["transaction_id"] for row in rows)
    return found


def quarantined(config: Config) -> list[str]:
    """Return the reason of each quarantined record, cut to its first two words."""
    location = quarantine.TABLE.path(config.warehouse)
    try:
        rows = DeltaTable(location).to_pyarrow_table(columns=["reason"]).to_pylist()
    except Exception:  # not created yet: nothing quarantined
        return []
    return [" ".join(row["reason"].split()[1:3]) for row in rows]


def test_a_delivery_to_a_name_refused_today_is_kept_out_of_every_table(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A half landed by an earlier version can name a topic refused today: its delivery is
    left out of the batch's writes (and logged), the others go on."""
    rows = pa.Table.from_pylist(
        [
            {"topic": "%2e%2e", "queue_id": 0, "transaction_id": "old-1"},
            {"topic": "Payments", "queue_id": 0, "transaction_id": "new-1"},
            {"topic": "a|b", "queue_id": 3, "transaction_id": "old-2"},
        ]
    )
    counts = Counter({("%2e%2e", 0): 1, ("Payments", 0): 1, ("a|b", 3): 1})
    with caplog.at_level(logging.ERROR, logger="streams.query.batch_writer"):
        kept, kept_counts = deliverable(rows, counts)
    assert kept.column("transaction_id").to_pylist() == ["new-1"]
    assert kept_counts == Counter({("Payments", 0): 1})
    assert "old-1, old-2" in caplog.text and "'%2e%2e'" in caplog.text
    assert deliverable(kept, kept_counts) == (kept, kept_counts)
