"""When each delivered message became visible in `topics/<topic>`, read from the Delta log.

A row of a Delta table is visible to readers from the moment the commit file that adds its
data file exists: `_delta_log/<version>.json` is written once, atomically, by the commit.
So the visible time of a transaction is the modification time of the first commit file
that added a data file holding it (its `commitInfo.timestamp` is taken a moment earlier,
when the commit was prepared, and is used only where the file time is unavailable).
Commits that only rearrange data (auto compaction: `dataChange: false`) are skipped: they
make nothing newly visible. Local warehouses only (the benchmark makes its own).
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pyarrow.parquet as pq


def visible_times(table_dir: Path) -> dict[str, int]:
    """Return transaction id -> epoch ms of the commit that made its row visible."""
    log_dir = table_dir / "_delta_log"
    if not log_dir.is_dir():
        return {}
    visible: dict[str, int] = {}
    commits = sorted(log_dir.glob("[0-9]*.json"), key=lambda p: int(p.stem))
    for commit in commits:
        at_ms: int | None = commit.stat().st_mtime_ns // 1_000_000
        added: list[str] = []
        prepared_ms = None
        for line in commit.read_text().splitlines():
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
            ids = pq.read_table(table_dir / path, columns=["transaction_id"]).column(0)
            for transaction_id in ids.to_pylist():
                if transaction_id is not None and transaction_id not in visible:
                    visible[transaction_id] = at_ms
    return visible


def latencies_ms(acks: dict[str, int], visible: dict[str, int]) -> list[float]:
    """Return visible - acknowledged (ms) for every acknowledged transaction that is visible."""
    return [float(visible[tx] - at) for tx, at in acks.items() if tx in visible]


def commit_counts(warehouse: Path) -> dict[str, int]:
    """Return table name ("system/half_messages") -> how many Delta commits it has."""
    return {
        str(log_dir.parent.relative_to(warehouse)): sum(1 for _ in log_dir.glob("[0-9]*.json"))
        for log_dir in sorted(warehouse.glob("*/*/_delta_log"))
    }
