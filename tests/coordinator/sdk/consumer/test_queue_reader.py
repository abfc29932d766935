"""The consumer's reads of a real Delta table (written by delta-rs here): the queues' ends
read again take only the new files, and still come out whole."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from coordinator.protocol.deliveries import QUEUE_OFFSETS_TABLE
from coordinator.sdk.consumer.queue_reader import QueueReader


def append(location: Path, rows: list[tuple[str, int, int, int]]) -> None:
    table = pa.Table.from_pylist(
        [{"topic": t, "queue_id": q, "next_offset": o, "batch_id": b} for t, q, o, b in rows],
        schema=pa.schema(
            [("topic", pa.string()), ("queue_id", pa.int32()), ("next_offset", pa.int64()),
             ("batch_id", pa.int64())]
        ),
    )  # fmt: skip
    write_deltalake(str(location), table, mode="append")


def test_ends_read_again_take_the_new_files_and_merge(tmp_path: Path) -> None:
    location = tmp_path / QUEUE_OFFSETS_TABLE
    reader = QueueReader(str(tmp_path))
    assert reader.ends(["A"]) == {}  # no table yet
    append(location, [("A", 0, 3, 1), ("A", 1, 2, 1), ("B", 0, 9, 1)])
    assert reader.ends(["A"]) == {("A", 0): 3, ("A", 1): 2}
    # A rebuild writes batch 0 again (streams/state/rebuild.py): numbers, not batch ids, count.
    append(location, [("A", 0, 5, 2), ("A", 2, 1, 0)])
    assert reader.ends(["A"]) == {("A", 0): 5, ("A", 1): 2, ("A", 2): 1}
    assert reader.ends(["A", "B"]) == {("A", 0): 5, ("A", 1): 2, ("A", 2): 1, ("B", 0): 9}
    assert QueueReader(str(tmp_path)).ends(["A"]) == reader.ends(["A"])  # read whole: the same
