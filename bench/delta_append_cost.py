"""What a delta-rs append costs when the table object is kept open, against reopened.

The coordinator's `BatchLedger` (streams/writes/delta_writes.py) keeps each local table it appends
to open between batches: opening reads the newest checkpoint and every commit after it. This
appends a 30-row batch (as the engine does, with an app transaction and no log cleanup) N
times to a fresh table, once keeping one table object for all appends and once opening it
afresh every REOPEN appends, and prints the CPU of this process per append over each block
of 100 appends (delta-rs works in Rust threads of this process: CPU time counts them all).

    .venv/bin/python bench/delta_append_cost.py [APPENDS] [REOPEN ...]   # default 600 100 20
    .venv/bin/python bench/delta_append_cost.py --files 1000 20000 60000

`--files` times an append (on a freshly opened table) against the number of files the table
already has, each with full column statistics, as `system/half_messages` and
`system/op_records` grew before the compactor (streams/writes/compactor.py) took them in: one file
per batch that lands halves or ops.

Measured (deltalake 1.6.6, 2 cores): kept open 9.8 / 16.0 / 26.1 / 32.4 / 43.3 / 47.1 ms per
append over the six blocks of 600; reopened every 100 8.5 / 8.1 / 9.4 / 11.2 / 11.6 / 10.5
(the table's growing file list alone); every 20 about the same. `--files`: 5.7 / 17.7 / 51.8 ms
per append at 1,000 / 20,000 / 60,000 files (opening 10 / 85 / 212 ms), about 0.8 ms more per
1,000 files.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import pyarrow as pa
from deltalake import (
    CommitProperties,
    DeltaTable,
    PostCommitHookProperties,
    Transaction,
    write_deltalake,
)
from deltalake.transaction import AddAction

ROWS = pa.table(
    {
        "id": pa.array(range(30), pa.int64()),
        "body": pa.array(["x" * 40] * 30),
        "at": pa.array([1.5] * 30),
    }
)
NO_CLEANUP = PostCommitHookProperties(cleanup_expired_logs=False)
BLOCK = 100


def cpu_per_append(appends: int, reopen: int | None) -> list[float]:
    """Return the CPU milliseconds per append of each block of BLOCK appends."""
    location = tempfile.mkdtemp(prefix="delta-append-cost-")
    write_deltalake(location, ROWS, mode="append")
    table = DeltaTable(location)
    blocks, started = [], time.process_time()
    for batch in range(1, appends + 1):
        if reopen is not None and batch % reopen == 0:
            table = DeltaTable(location)
        write_deltalake(
            table,
            ROWS,
            mode="append",
            commit_properties=CommitProperties(app_transactions=[Transaction("bench", batch)]),
            post_commithook_properties=NO_CLEANUP,
        )
        if batch % BLOCK == 0:
            blocks.append((time.process_time() - started) / BLOCK * 1000)
            started = time.process_time()
    return blocks


#: Hard links one file may have (ext4's limit is 65,000): copies beyond.
LINKS_PER_FILE = 60_000
STATS = json.dumps(
    {
        "numRecords": 30,
        "minValues": {"id": 0, "body": "x" * 32, "at": 1.5},
        "maxValues": {"id": 29, "body": "x" * 32, "at": 1.5},
        "nullCount": {"id": 0, "body": 0, "at": 0},
    }
)


def cpu_per_append_with_files(files: int, appends: int = 10) -> tuple[float, float]:
    """Return (CPU ms per append, ms to open) for a table that already has `files` files."""
    location = tempfile.mkdtemp(prefix="delta-append-files-")
    write_deltalake(location, ROWS, mode="append")
    table = DeltaTable(location)
    first = os.path.join(location, table.file_uris()[0].split("/")[-1])
    size, actions, source = os.path.getsize(first), [], first
    for index in range(files):
        if index and index % LINKS_PER_FILE == 0:  # a fresh source file for the next links
            source = os.path.join(location, f"source-{index}.parquet")
            with open(first, "rb") as original, open(source, "wb") as copy:
                copy.write(original.read())
        name = f"copy-{index}.parquet"
        os.link(source, os.path.join(location, name))
        actions.append(AddAction(name, size, {}, int(time.time() * 1000), True, STATS))
    table.create_write_transaction(actions, mode="append", schema=table.schema())
    table.create_checkpoint()
    started = time.process_time()
    table = DeltaTable(location)
    opening = (time.process_time() - started) * 1000
    started = time.process_time()
    for batch in range(appends):
        write_deltalake(
            table,
            ROWS,
            mode="append",
            commit_properties=CommitProperties(app_transactions=[Transaction("bench", batch)]),
            post_commithook_properties=NO_CLEANUP,
        )
    return (time.process_time() - started) / appends * 1000, opening


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        description="CPU of a delta-rs append: a table kept open against reopened, or against "
        "the number of files the table already has.",
    )
    parser.add_argument(
        "appends", nargs="?", type=int, default=600, help="appends per case (default 600)"
    )
    parser.add_argument(
        "reopen",
        nargs="*",
        type=int,
        default=[100, 20],
        help="reopen the table every N appends, one case per N (default 100 20)",
    )
    parser.add_argument(
        "--files",
        nargs="+",
        type=int,
        metavar="N",
        help="instead: time an append on a table that already has N files, one case per N",
    )
    args = parser.parse_args(argv)
    if args.files:
        for files in args.files:
            append, opening = cpu_per_append_with_files(files)
            print(f"{files:>8,} files: {append:.1f} ms per append, {opening:.1f} ms to open")
        return
    for reopen in [None, *args.reopen]:
        label = "kept open" if reopen is None else f"reopened every {reopen}"
        blocks = cpu_per_append(args.appends, reopen)
        print(f"{label:>22}: " + " / ".join(f"{ms:.1f}" for ms in blocks) + " ms per append")


if __name__ == "__main__":
    main(sys.argv[1:])
