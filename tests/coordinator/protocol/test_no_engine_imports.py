"""The protocol and the SDK import nothing of Spark or Delta: a producer installs neither."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("pyspark", "py4j", "delta", "deltalake", "pandas", "pyarrow")


@pytest.mark.parametrize(
    "modules",
    [
        [
            "coordinator.protocol.ingress",
            "coordinator.protocol.names",
            "coordinator.protocol.check_record",
            "coordinator.protocol.records",
        ],
        ["coordinator.sdk", "coordinator.sdk.rest_transport", "coordinator.sdk.kafka_transport"],
    ],
)
def test_importing_imports_no_engine_module(modules: list[str]) -> None:
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))
