"""A table's shared snapshots hold every commit made before a reader asked (snapshots.py).

The refresh is shared by the readers that wait for it, so freshness is what could go wrong:
a reader served by a refresh that began before it asked would miss a commit it had seen
made. Real Delta tables on disk, written by delta-rs while readers read.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from delta_tables.snapshots import TableSnapshots

#: Commits made while the readers read: enough for a reader to come during a refresh that
#: began before the commit it saw (how a stale answer would show).
COMMITS = 80


def snapshots_of(location: Path) -> TableSnapshots:
    return TableSnapshots(functools.partial(DeltaTable, str(location)))


def rows(snapshots: TableSnapshots) -> list[int]:
    snapshot = snapshots.fresh()
    return [] if snapshot is None else sorted(snapshot.to_table().column("n").to_pylist())


def test_a_table_made_later_is_found_and_each_commit_is_read(tmp_path: Path) -> None:
    location = tmp_path / "table"
    snapshots = snapshots_of(location)
    assert snapshots.fresh() is None  # no table yet: nothing to read, no error
    write_deltalake(str(location), pa.table({"n": [0]}))
    assert rows(snapshots) == [0]
    write_deltalake(str(location), pa.table({"n": [1]}), mode="append")
    assert rows(snapshots) == [0, 1]


def test_every_reader_sees_every_commit_made_before_it_asked(tmp_path: Path) -> None:
    location = tmp_path / "table"
    write_deltalake(str(location), pa.table({"n": [0]}))
    snapshots = snapshots_of(location)
    committed = [1]  # rows committed so far; appended to after each commit ends
    done = threading.Event()
    stale: list[tuple[int, int]] = []
    reads = [0]

    def read_again_and_again() -> None:
        while not done.is_set():
            before = committed[-1]
            seen = len(rows(snapshots))
            reads[0] += 1
            if seen < before:
                stale.append((before, seen))

    readers = [threading.Thread(target=read_again_and_again) for _ in range(8)]
    for reader in readers:
        reader.start()
    try:
        for n in range(1, COMMITS):
            write_deltalake(str(location), pa.table({"n": [n]}), mode="append")
            committed.append(n + 1)
    finally:
        done.set()
        for reader in readers:
            reader.join(30)
    assert stale == [], f"(rows committed before a read, rows it saw): {stale[:5]}"
    assert reads[0] > COMMITS  # the readers did overlap the commits
    assert rows(snapshots) == list(range(COMMITS))
