"""`kill -9` inside `txcoord state rebuild`: the old checkpoint stays in use or the new one is
complete, the same command finishes it, and nothing is lost or written twice (real stack).

Transactions wait in a checkpoint of 2 partitions; commits for some of them arrive while a
rebuild is under way, so the new checkpoint's first batch delivers. The rebuild to 3
partitions is killed (the whole process tree, SIGKILL) at each of its steps in turn: once
its plan is recorded, inside its first batch right after a write, and once that batch
committed but before the switch. Then the checkpoint is deleted and the rebuild from the
warehouse is killed the same way, after its plan and inside its first batch. After each
kill the coordinator refuses to start (or still starts on the old checkpoint, before any
batch of the new one), and running the command again goes on. At the end every committed
message is in its topic exactly once, with dense queue offsets, every transaction ended as
without the crashes, and a late op is judged against a decision made before them.
"""

from __future__ import annotations

import shutil
import sys
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from coordinator.core.config import Config, load_config
from coordinator.core.errors import ConfigurationError
from coordinator.core.failpoints import REACHED
from streams.checkpoint.checkpoint_files import LocalFiles
from streams.checkpoint.generations import active_facts, interrupted_rebuild
from tests.app_process import AppProcess
from tests.conftest import settings_under
from tests.harness import TOPIC, Engine, Producer, count, table, wait_for
from tests.streams.state.test_rebuild import TIMING

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

#: Each kill, in turn: the failpoint the rebuild freezes at (coordinator/core/failpoints.py):
#: three in a rebuild from the checkpoint, then two in one from the warehouse.
FROM_CHECKPOINT = (
    "rebuild.planned=1",
    "coordinator.after_queue_offsets=1",
    "rebuild.before_switch=1",
)
FROM_WAREHOUSE = ("rebuild.planned=1", "coordinator.after_topic_append=1")
REBUILD_FAILPOINTS = FROM_CHECKPOINT + FROM_WAREHOUSE
#: Transactions: all wait first; a quarter is committed during each rebuild, the rest after.
WAITING = 12
DURING_FIRST, DURING_SECOND = range(0, 3), range(3, 6)
#: Seconds for a rebuild's process to start Spark and reach its failpoint, or finish.
REBUILD_BOUND = 300


def settings_of(root: Path, bootstrap_servers: str) -> dict[str, str]:
    return settings_under(root, bootstrap_servers, **TIMING)


def rebuild_process(settings: dict[str, str], source: str, *failpoints: str) -> AppProcess:
    """Start `txcoord state rebuild --partitions 3` on the test's cluster, failpoints armed."""
    command = [
        sys.executable, "-m", "coordinator", "state", "rebuild", "--cluster",
        "--from", source, "--partitions", "3", "--driver-memory", "1g",
        *[arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")],
        *[arg for spec in failpoints for arg in ("--failpoint", spec)],
    ]  # fmt: skip
    return AppProcess({}, command=command)


def kill_at(settings: dict[str, str], source: str, spec: str) -> None:
    name = spec.split("=", maxsplit=1)[0]
    process = rebuild_process(settings, source, spec)
    try:
        reached = process.wait_for_line(REACHED.format(name=name), REBUILD_BOUND)
        assert reached, f"the rebuild never reached {name}:\n{process.tail()}"
    finally:
        process.kill9()


def killed_and_finished(
    spark: SparkSession,
    settings: dict[str, str],
    source: str,
    committed: range,
    producer: Producer,
) -> None:
    """Kill a rebuild from `source` at each of its failpoints, then finish it; `committed`
    transactions are committed once the first kill left the plan recorded."""
    config = load_config(overrides=settings)
    files = LocalFiles(config.streams.checkpoint_dir)
    in_use = active_facts(files).name
    specs = FROM_CHECKPOINT if source == "checkpoint" else FROM_WAREHOUSE
    for spec in specs:
        kill_at(settings, source, spec)
        if spec == specs[0]:  # for the new checkpoint's first batch to decide
            for n in committed:
                producer.op(f"waiting-{n}", "COMMIT")
            producer.flush()
        assert active_facts(files).name == in_use  # the old one (or none), in use
        if spec == specs[0]:
            assert interrupted_rebuild(files) is None  # nothing started: to be redone
        else:  # its first batch had started: no start until the rebuild is finished
            assert interrupted_rebuild(files) is not None
            with pytest.raises(ConfigurationError, match="interrupted"):
                Engine(spark, config)
    finished = rebuild_process(settings, source)
    assert finished.process.wait(REBUILD_BOUND) == 0, finished.tail()


def conflicts(spark: SparkSession, config: Config) -> list[str]:
    rows = table(spark, config, "system/op_verdicts").where("verdict = 'CONFLICT'").collect()
    return [r.transaction_id for r in rows]


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
                lambda: count(config, "system/check_requests") >= WAITING,
                120,
                "a first check of each",
            )
        finally:
            engine.stop()

        killed_and_finished(spark, settings, "checkpoint", DURING_FIRST, producer)
        assert (active_facts(files).name, active_facts(files).shuffle_partitions) == (
            "coordinator.1",
            3,
        )
        shutil.rmtree(config.streams.checkpoint_dir)  # lost: the state comes from the warehouse
        killed_and_finished(spark, settings, "warehouse", DURING_SECOND, producer)
        assert (active_facts(files).name, active_facts(files).shuffle_partitions) == (
            "coordinator.1",
            3,
        )

        engine = Engine(spark, three)
        try:
            for tx in ids("waiting", WAITING)[DURING_SECOND.stop :]:
                producer.op(tx, "COMMIT")
            producer.op("waiting-0", "ROLLBACK")  # late: judged against its commit
            producer.flush()
            wait_for(
                lambda: (
                    count(config, f"topics/{TOPIC}") >= WAITING
                    and conflicts(spark, config) == ["waiting-0"]
                ),
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
