"""Which generation of the coordinator's checkpoint is in use, what it holds, and which
configurations are refused before anything starts (pure: Spark's files written by hand)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coordinator.core.config import load_config
from coordinator.core.errors import ConfigurationError
from streams.checkpoint.checkpoint_files import LocalFiles
from streams.checkpoint.generations import (
    ACTIVE_MARK,
    REBUILD_FILE,
    STATE_LAYOUT_FILE,
    active_facts,
    active_generation,
    facts,
    interrupted_rebuild,
)
from streams.query.decision_query import STATE_LAYOUT, check_coordinator_state, state_problem


def batch(root: Path, name: str, number: int, partitions: int, *, committed: bool) -> None:
    """Write the offsets file of batch `number` of generation `name` as Spark does."""
    metadata = {"batchWatermarkMs": 0, "conf": {"spark.sql.shuffle.partitions": str(partitions)}}
    offsets = {"txcoord.half": {"0": 10 + number}, "txcoord.op": {"0": 20 + number}}
    folder = root / name / "offsets"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / str(number)).write_text(f"v1\n{json.dumps(metadata)}\n{json.dumps(offsets)}")
    if committed:
        (root / name / "commits").mkdir(exist_ok=True)
        (root / name / "commits" / str(number)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def generation(root: Path, name: str, partitions: int, batches: int = 2) -> None:
    (root / name).mkdir(parents=True)
    (root / name / STATE_LAYOUT_FILE).write_text(STATE_LAYOUT)
    for number in range(batches):
        batch(root, name, number, partitions, committed=True)


def test_the_newest_marked_generation_is_in_use(tmp_path: Path) -> None:
    files = LocalFiles(str(tmp_path))
    assert active_generation(files) == 0  # none at all: the first, to be made
    generation(tmp_path, "coordinator", 2)
    generation(tmp_path, "coordinator.1", 8)  # built, not switched to: not in use
    assert active_facts(files).name == "coordinator"
    (tmp_path / "coordinator.1" / ACTIVE_MARK).write_text("{}")
    assert active_generation(files) == 1
    held = active_facts(files)
    assert (held.shuffle_partitions, held.last_committed) == (8, 1)
    assert held.committed_offsets == {"txcoord.half": {"0": 11}, "txcoord.op": {"0": 21}}


def test_a_batch_planned_and_not_committed_is_unfinished(tmp_path: Path) -> None:
    generation(tmp_path, "coordinator", 2)
    batch(tmp_path, "coordinator", 2, 2, committed=False)
    held = facts(LocalFiles(str(tmp_path)), 0)
    assert held.unfinished and (held.last_planned, held.last_committed) == (2, 1)
    # The offsets to go on from are the last *committed* batch's.
    assert held.committed_offsets == {"txcoord.half": {"0": 11}, "txcoord.op": {"0": 21}}


def test_another_partition_count_or_layout_is_refused_with_the_command(tmp_path: Path) -> None:
    generation(tmp_path, "coordinator", 2)
    files = LocalFiles(str(tmp_path))
    assert state_problem(active_facts(files), 2) is None
    problem = state_problem(active_facts(files), 8)
    assert problem is not None and "txcoord state rebuild --partitions 8" in problem
    (tmp_path / "coordinator" / STATE_LAYOUT_FILE).write_text("something,else")
    problem = state_problem(active_facts(files), 2)
    assert problem is not None and "state: something,else" in problem
    assert "txcoord state rebuild --from warehouse" in problem
    (tmp_path / "coordinator" / STATE_LAYOUT_FILE).unlink()  # an earlier version's: no record
    problem = state_problem(active_facts(files), 2)
    assert problem is not None and "keyed by transaction id alone" in problem


def test_a_new_checkpoint_is_never_refused(tmp_path: Path) -> None:
    assert state_problem(active_facts(LocalFiles(str(tmp_path / "none"))), 5) is None


def test_an_interrupted_rebuild_blocks_a_start_until_it_is_finished(tmp_path: Path) -> None:
    generation(tmp_path, "coordinator", 2)
    files = LocalFiles(str(tmp_path))
    (tmp_path / "coordinator.1").mkdir()
    (tmp_path / "coordinator.1" / REBUILD_FILE).write_text("{}")
    assert interrupted_rebuild(files) is None  # its query never planned a batch: nothing
    batch(tmp_path, "coordinator.1", 0, 4, committed=False)
    assert interrupted_rebuild(files) == 1
    problem = state_problem(active_facts(files), 2, "coordinator.1")
    assert problem is not None and "txcoord state rebuild" in problem


def test_the_check_before_spark_reads_a_local_checkpoint_folder(tmp_path: Path) -> None:
    generation(tmp_path / "checkpoints", "coordinator", 2)
    config = load_config(
        overrides={
            "streams.checkpoint_dir": str(tmp_path / "checkpoints"),
            "spark.shuffle_partitions": "4",
        }
    )
    with pytest.raises(ConfigurationError, match="--partitions 4"):
        check_coordinator_state(config)  # no session: read with Python
    remote = load_config(overrides={"streams.checkpoint_dir": "s3a://bucket/checkpoints"})
    check_coordinator_state(remote)  # checked once Spark runs (start_coordinator)
