"""What a delta-rs append costs when the table object is kept open, against reopened.

The coordinator's `BatchLedger` (streams/delta_writes.py) keeps each local table it appends
to open between batches: opening reads the newest checkpoint and every commit after it. This
appends a 30-row batch (as the engine does, with an app transaction and no log cleanup) N
times to a fresh table, once keeping one table object for all appends and once opening it
afresh every REOPEN appends, and prints the CPU of this process per append over each block
of 100 appends (delta-rs works in Rust threads of this process: CPU time counts them all).

    .venv/bin/python bench/delta_append_cost.py [APPENDS] [REOPEN ...]   # default 600 100 20

Measured (deltalake 1.6.6, 2 cores): kept open 9.8 / 16.0 / 26.1 / 32.4 / 43.3 / 47.1 ms per
append over the six blocks of 600; reopened every 100 8.5 / 8.1 / 9.4 / 11.2 / 11.6 / 10.5
(the table's growing file list alone); every 20 about the same.
"""

from __future__ import annotations

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


def main(argv: list[str]) -> None:
    appends = int(argv[0]) if argv else 600
    reopens = [int(arg) for arg in argv[1:]] or [100, 20]
    for reopen in [None, *reopens]:
        label = "kept open" if reopen is None else f"reopened every {reopen}"
        blocks = cpu_per_append(appends, reopen)
        print(f"{label:>22}: " + " / ".join(f"{ms:.1f}" for ms in blocks) + " ms per append")


if __name__ == "__main__":
    main(sys.argv[1:])
