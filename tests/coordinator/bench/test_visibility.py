"""A row is visible from the Delta commit that added it; compactions make nothing new visible."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from coordinator.bench.visibility import latencies_ms, visible_times


def _append(table: Path, ids: list[str]) -> None:
    write_deltalake(
        str(table), pa.table({"transaction_id": ids, "n": list(range(len(ids)))}), mode="append"
    )


def _set_commit_time(table: Path, version: int, epoch_ms: int) -> None:
    commit = table / "_delta_log" / f"{version:020d}.json"
    os.utime(commit, ns=(epoch_ms * 1_000_000, epoch_ms * 1_000_000))


def test_each_row_is_visible_from_its_first_commit(tmp_path: Path) -> None:
    table = tmp_path / "topic"
    _append(table, ["a", "b"])
    _append(table, ["c"])
    _set_commit_time(table, 0, 1_000)
    _set_commit_time(table, 1, 5_000)
    assert visible_times(str(table)) == {"a": 1_000, "b": 1_000, "c": 5_000}


def test_a_compaction_does_not_move_visibility(tmp_path: Path) -> None:
    table = tmp_path / "topic"
    _append(table, ["a"])
    _append(table, ["b"])
    DeltaTable(str(table)).optimize.compact()
    versions = sorted((table / "_delta_log").glob("*.json"))
    assert len(versions) == 3
    added = [json.loads(line) for line in versions[-1].read_text().splitlines()]
    assert any("add" in action and not action["add"]["dataChange"] for action in added)
    for version in range(3):
        _set_commit_time(table, version, 1_000 * (version + 1))
    assert visible_times(str(table)) == {"a": 1_000, "b": 2_000}


def test_no_table_means_nothing_visible(tmp_path: Path) -> None:
    assert visible_times(str(tmp_path / "absent")) == {}


def test_latency_is_visible_minus_acknowledged_for_the_visible_only() -> None:
    assert latencies_ms({"a": 100, "b": 200, "gone": 300}, {"a": 1100, "b": 1700}) == [
        1000.0, 1500.0,
    ]  # fmt: skip
