"""CPU per transaction of committed bench results, side by side, with the host's own yardstick.

`txcoord bench` reports, per path, the CPU every process of the run used per decided
transaction (coordinator/bench/cpu_cost.py); results written before that section existed
have every number it is computed from. This prints the Kafka path's figure for each result
file given, beside what measures the host in the same run: the Java peer's CPU per record
(Kafka's own transactional producer, code not ours), the kafka-python peer's tx/s and the
raw Kafka -> Delta ceiling. Our CPU in Java-peer records is the column to compare across hosts.

    .venv/bin/python bench/cpu_across_runs.py bench/results/bench-*.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from coordinator.bench.cpu_cost import cpu_per_transaction
from coordinator.bench.resources import SPARK

COLUMNS = (
    "run",
    "host",
    "kafka tx/s",
    "CPU ms/tx",
    "Spark JVM ms/tx",
    "Java peer us/record",
    "in Java records",
    "kafka-python peer tx/s",
    "ceiling records/s",
)


def _host(platform: str) -> str:
    """Return what names the machine: the kernel build of a Firecracker VM ("v782" of
    "Linux-6.18.44-fc-v782-x86_64-..."), else the whole platform string."""
    parts = platform.split("-")
    return parts[3] if len(parts) > 3 and parts[2] == "fc" else platform


def row(path: Path) -> list[str] | None:
    """Return the table row of one result file, None when it has no Kafka path measured."""
    result: dict[str, Any] = json.loads(path.read_text())
    cost = cpu_per_transaction(result).get("kafka")
    if cost is None:
        return None
    kafka = result["paths"]["kafka"]
    peer = (result.get("peer") or {}).get("tx_per_s")
    ceiling = (result.get("ceiling") or {}).get("rows_per_s_median")

    def number(value: float | None, digits: int) -> str:
        return "-" if value is None else f"{value:,.{digits}f}"

    return [
        path.stem.removeprefix("bench-"),
        _host(result["machine"]["platform"]),
        number(kafka["sustained_tx_per_s"], 0),
        number(cost["ms"], 3),
        number(cost["by_process"].get(SPARK), 3),
        number(cost["java_short_us_per_record"], 0),
        number(cost["in_java_records"], 2),
        number(peer, 1),
        number(ceiling, 0),
    ]


def main(paths: list[str]) -> int:
    """Print a markdown table of the given result files (JSON)."""
    if not paths:
        print(__doc__)
        return 2
    print("| " + " | ".join(COLUMNS) + " |")
    print("|---|---|" + "---:|" * (len(COLUMNS) - 2))
    for name in paths:
        found = row(Path(name))
        if found is not None:
            print("| " + " | ".join(found) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
