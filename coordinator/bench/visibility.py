"""When each delivered message became visible in `topics/<topic>`, read from the Delta log.

A row of a Delta table is visible to readers from the moment the commit file that adds its
data file exists: `_delta_log/<version>.json` is written once, atomically, by the commit.
So the visible time of a transaction is the modification time of the first commit file
that added a data file holding it (its `commitInfo.timestamp` is taken a moment earlier,
when the commit was prepared, and is used only where the file time is unavailable).
Commits that only rearrange data (auto compaction: `dataChange: false`) are skipped: they
make nothing newly visible. A warehouse on local disk or on an S3 API (Arrow's file systems).
"""

from __future__ import annotations

import json
from urllib.parse import unquote

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from delta_tables.object_store import commit_files, filesystem, listing


def commits_of(location: str) -> int:
    """Return how many commits the log of the table at `location` has (0: no table)."""
    fs, table = filesystem(location)
    return len(commit_files(fs, table))


def visible_times(location: str) -> dict[str, int]:
    """Return transaction id -> epoch ms of the commit that made its row visible.

    On local disk that is the commit file's modification time; on an S3 API the commit's own
    `commitInfo.timestamp` (an object's LastModified has whole seconds on some stores).
    """
    fs, table = filesystem(location)
    remote = not isinstance(fs, pafs.LocalFileSystem)
    visible: dict[str, int] = {}
    for commit in commit_files(fs, table):
        at_ms: int | None = (
            None if remote or commit.mtime_ns is None else commit.mtime_ns // 1_000_000
        )
        added: list[str] = []
        prepared_ms = None
        with fs.open_input_stream(commit.path) as stream:
            text = stream.read().decode("utf-8")
        for line in text.splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "commitInfo" in action:
                prepared_ms = action["commitInfo"].get("timestamp")
            add = action.get("add")
            if add is not None and add.get("dataChange", True):
                added.append(unquote(add["path"]))
        if not added:
            continue
        at_ms = at_ms or prepared_ms
        if at_ms is None:
            continue
        for path in added:
            ids = pq.read_table(f"{table}/{path}", columns=["transaction_id"], filesystem=fs)
            for transaction_id in ids.column(0).to_pylist():
                if transaction_id is not None and transaction_id not in visible:
                    visible[transaction_id] = at_ms
    return visible


def latencies_ms(acks: dict[str, int], visible: dict[str, int]) -> list[float]:
    """Return visible - acknowledged (ms) for every acknowledged transaction that is visible."""
    return [float(visible[tx] - at) for tx, at in acks.items() if tx in visible]


def commit_counts(warehouse: str) -> dict[str, int]:
    """Return table name ("system/half_messages") -> how many Delta commits it has."""
    fs, root = filesystem(warehouse)
    found = {}
    for folder in ("system", "topics"):
        for table in listing(fs, f"{root}/{folder}"):
            if table.type == pafs.FileType.Directory and (commits := commit_files(fs, table.path)):
                found[f"{folder}/{table.base_name}"] = len(commits)
    return found
