"""What one delta-rs append to a local table costs as its `_delta_log` folder fills.

The coordinator appends to each table it writes about once a micro-batch (about once a
second under steady load), and Delta keeps every commit file for the table's
`delta.logRetentionDuration`: ~3,700 files an hour, ~86,000 a day, ~600,000 a week per
table. Every append lists the log folder, on this machine's disk with a cost per file
however old; delta-rs also cleans expired log files up after every commit, listing the
whole folder with three `stat`s per file.

This builds a table whose log holds N commit files before its newest checkpoint (the
steady state of a table that commits once a second and keeps N seconds of history), then
times 20 appends two ways:

- delta-rs's default, as the ledger did before (refresh, append, clean up after the commit);
- the ledger's way now (streams/writes/delta_writes.py): append only, no refresh, no cleanup
  (it cleans up once in CLEANUP_EVERY appends).

    .venv/bin/python bench/delta_log_growth.py [FILES ...]   # default 0 3700 21700 86500
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, PostCommitHookProperties, write_deltalake

APPENDS = 20
ROWS = pa.table({"id": pa.array(range(100), pa.int64())})
NO_CLEANUP = PostCommitHookProperties(cleanup_expired_logs=False)


def table_with_history(folder: Path, files: int) -> DeltaTable:
    """Return a table with `files` commit files (each a commit of no change) before its
    newest checkpoint, kept as a long retention keeps them."""
    location = str(folder / f"t{files}")
    write_deltalake(location, ROWS, mode="append")
    log = Path(location) / "_delta_log"
    commit = (
        json.dumps({"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}})
        + "\n"
    )
    for version in range(1, files + 1):
        (log / f"{version:020d}.json").write_text(commit)
    table = DeltaTable(location)
    table.create_checkpoint()  # replays every commit once
    return DeltaTable(location)


def median_ms(append: Callable[[], None]) -> float:
    """Return the median time of APPENDS calls of `append`, in milliseconds."""
    seconds = []
    for _ in range(APPENDS):
        started = time.perf_counter()
        append()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds) * 1000


def main(sizes: list[int]) -> None:
    """Print the median append time both ways with each number of commit files kept."""
    print(f"{'commit files kept':>18} {'delta-rs default':>17} {'the ledger now':>15}")
    with tempfile.TemporaryDirectory() as folder:
        for size in sorted(sizes):
            table = table_with_history(Path(folder), size)

            def default(table: DeltaTable = table) -> None:
                table.update_incremental()
                write_deltalake(table, ROWS, mode="append")

            def ledger(table: DeltaTable = table) -> None:
                write_deltalake(table, ROWS, mode="append", post_commithook_properties=NO_CLEANUP)

            print(
                f"{size:>18,} {median_ms(default):>14.1f} ms {median_ms(ledger):>12.1f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [0, 3_700, 21_700, 86_500])
