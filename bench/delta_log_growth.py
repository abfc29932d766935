"""What one delta-rs append to a local table costs as its `_delta_log` folder fills.

The coordinator appends to each table it writes about once a micro-batch (about once a
second under steady load), and Delta keeps every commit file for the table's
`delta.logRetentionDuration` (7 days here, delta_tables/table.py): up to ~600,000 files per
table. delta-rs lists the whole `_delta_log` folder of a local table, with a `stat` of
every entry, several times per append, so an append's cost follows the number of files
there, whatever they are. This measures that: a small table, then empty placeholder files
added to its log folder (names Delta ignores), and the median time of 20 appends (each
after `update_incremental`, as streams/delta_writes.py does) at each size.

    .venv/bin/python bench/delta_log_growth.py [FILES ...]   # default 0 10000 50000 100000
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

APPENDS = 20


def main(sizes: list[int]) -> None:
    """Print the median append time with each number of extra files in the log folder."""
    rows = pa.table({"id": pa.array(range(100), pa.int64())})
    with tempfile.TemporaryDirectory() as folder:
        location = str(Path(folder) / "table")
        write_deltalake(location, rows, mode="append")
        table = DeltaTable(location)
        log = Path(location) / "_delta_log"
        made = 0
        for size in sorted(sizes):
            while made < size:
                (log / f".placeholder-{made:08d}.json.tmp").touch()
                made += 1
            seconds = []
            for _ in range(APPENDS):
                started = time.perf_counter()
                table.update_incremental()
                write_deltalake(table, rows, mode="append")
                seconds.append(time.perf_counter() - started)
            files = sum(1 for _ in log.iterdir())
            print(f"{files:>9,} files in _delta_log: append p50 "
                  f"{statistics.median(seconds) * 1000:8.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [0, 10_000, 50_000, 100_000])
