"""`kill -9` inside `txcoord state rebuild`: the old checkpoint stays in use or the new one is
complete, the same command finishes it, and nothing is lost or written twice (real stack).

Transactions wait in a checkpoint of 2 partitions; commits for some of them arrive while the
rebuild is under way, so the new checkpoint's first batch delivers. The rebuild to 3
partitions is killed (the whole process tree, SIGKILL) at each of its steps in turn: once
its plan is recorded, inside its first batch right after a topic append, and once that
batch committed but before the switch. After each kill the coordinator refuses to start
(or still starts on the old checkpoint, before any batch of the new one), and running the
command again goes on. At the end every committed message is in its topic exactly once,
with dense queue offsets, and every transaction ended as without the crashes.
"""

from __future__ import annotations

import sys
import uuid
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from coordinator.core.config import Config, load_config
from coordinator.core.errors import ConfigurationError
from coordinator.core.failpoints import REACHED
from streams.checkpoint_files import LocalFiles
from streams.coordinator_checkpoint import active_facts, interrupted_rebuild
from tests.app_process import AppProcess
from tests.harness import TOPIC, Engine, Producer, table, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long(3.0)]

#: Each kill, in turn: the failpoint the rebuild freezes at (coordinator/core/failpoints.py).
REBUILD_FAILPOINTS = (
    "rebuild.planned=1",
    "coordinator.after_queue_offsets=1",
    "rebuild.before_switch=1",
)
WAITING, COMMITTED_WHILE_STOPPED = 10, 6
#: Seconds for a rebuild's process to start Spark and reach its failpoint, or finish.
REBUILD_BOUND = 300


def settings_of(root: Path, bootstrap_servers: str) -> dict[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return {
        "warehouse": str(root / "warehouse"),
        "kafka.bootstrap_servers": bootstrap_servers,
        "kafka.half_topic": f"half-{suffix}",
        "kafka.op_topic": f"op-{suffix}",
        "kafka.check_topic": f"check-{suffix}",
        "kafka.partitions": "2",
        "streams.checkpoint_dir": str(root / "checkpoints"),
        "metrics.port": "0",
        "transaction_timeout": "3s",
        "transaction_check_interval": "3s",
        "transaction_check_max": "1000",
        "streams.trigger_interval": "1s",
        "streams.tick_interval": "1s",
        "streams.resolved_retention": "1h",
    }


def rebuild_process(settings: dict[str, str], *failpoints: str) -> AppProcess:
    """Start `txcoord state rebuild --partitions 3` on the test's cluster, failpoints armed."""
    command = [
        sys.executable, "-m", "coordinator", "state", "rebuild", "--cluster",
        "--partitions", "3", "--driver-memory", "1g",
        *[arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")],
        *[arg for spec in failpoints for arg in ("--failpoint", spec)],
    ]  # fmt: skip
    return AppProcess({}, command=command)


def kill_at(settings: dict[str, str], spec: str) -> None:
    name = spec.split("=", maxsplit=1)[0]
    process = rebuild_process(settings, spec)
    try:
        reached = process.wait_for_line(REACHED.format(name=name), REBUILD_BOUND)
        assert reached, f"the rebuild never reached {name}:\n{process.tail()}"
    finally:
        process.kill9()


def ids(kind: str, count: int) -> list[str]:
    return [f"{kind}-{n}" for n in range(count)]


def test_a_rebuild_killed_at_any_step_is_finished_by_running_it_again(
    spark: SparkSession, bootstrap_servers: str, tmp_path: Path
) -> None:
    settings = settings_of(tmp_path, bootstrap_servers)
    config = load_config(overrides=settings)
    three: Config = replace(config, spark=replace(config.spark, shuffle_partitions=3))
    files = LocalFiles(config.streams.checkpoint_dir)
    producer = Producer(config)
    try:
        engine = Engine(spark, config)
        try:
            for tx in ids("waiting", WAITING):
                producer.half(tx)
            producer.flush()
            wait_for(
                lambda: table(spark, config, "system/check_requests").count() >= WAITING,
                120,
                "a first check of each",
            )
        finally:
            engine.stop()

        for spec in REBUILD_FAILPOINTS:
            kill_at(settings, spec)
            if spec == REBUILD_FAILPOINTS[0]:  # the old checkpoint finished, the plan made:
                for tx in ids("waiting", COMMITTED_WHILE_STOPPED):  # for the first batch
                    producer.op(tx, "COMMIT")
                producer.flush()
            assert active_facts(files).name == "coordinator"  # the old one, in use
            if spec == REBUILD_FAILPOINTS[0]:
                assert interrupted_rebuild(files) is None  # nothing started: to be redone
            else:  # its first batch had started: no start until the rebuild is finished
                assert interrupted_rebuild(files) == 1
                with pytest.raises(ConfigurationError, match="interrupted"):
                    Engine(spark, config)

        finished = rebuild_process(settings)
        assert finished.process.wait(REBUILD_BOUND) == 0, finished.tail()
        assert (active_facts(files).name, active_facts(files).shuffle_partitions) == (
            "coordinator.1",
            3,
        )

        engine = Engine(spark, three)
        try:
            for tx in ids("waiting", WAITING)[COMMITTED_WHILE_STOPPED:]:
                producer.op(tx, "COMMIT")
            producer.flush()
            wait_for(
                lambda: table(spark, config, f"topics/{TOPIC}").count() >= WAITING,
                120,
                "every transaction to be delivered",
            )
        finally:
            engine.stop()
    finally:
        producer.close()

    delivered = table(spark, config, f"topics/{TOPIC}").collect()
    assert sorted(r.transaction_id for r in delivered) == sorted(ids("waiting", WAITING))
    by_queue: dict[int, list[int]] = defaultdict(list)
    for row in delivered:
        by_queue[row.queue_id].append(row.queue_offset)
    for offsets in by_queue.values():
        assert sorted(offsets) == list(range(len(offsets)))  # dense, none twice
    finals = Counter(
        r.transaction_id for r in table(spark, config, "system/transactions").collect()
    )
    assert finals == Counter(ids("waiting", WAITING))  # each decided once
    applied = [
        r.transaction_id
        for r in table(spark, config, "system/op_verdicts").collect()
        if r.verdict == "APPLIED"
    ]
    assert sorted(applied) == sorted(ids("waiting", WAITING))
