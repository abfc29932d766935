"""bench/cpu_across_runs.py: a row per result file, from the numbers the bench wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench_scripts import load_script
from tests.coordinator.bench.test_cpu_cost import _result


def test_a_row_per_result_with_the_hosts_yardsticks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _result()
    result["machine"]["platform"] = "Linux-6.18.44-fc-v782-x86_64-with-glibc2.36"
    measured = tmp_path / "bench-20261127T212639Z.json"
    measured.write_text(json.dumps(result))
    result["paths"] = {"rest": result["paths"]["rest"]}  # no Kafka path: no row
    (tmp_path / "bench-20261127T000000Z.json").write_text(json.dumps(result))
    script = load_script("cpu_across_runs")
    assert script.row(measured) == [
        "20261127T212639Z", "v782", "250", "0.650", "0.500", "1,000", "0.65", "100.0", "5,000",
    ]  # fmt: skip
    assert script.main(sorted(str(p) for p in tmp_path.glob("*.json"))) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 3  # the header, its rule, one row
    assert table[2].startswith("| 20261127T212639Z | v782 | 250 |")
    assert script.main([]) == 2
