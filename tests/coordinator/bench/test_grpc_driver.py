"""The gRPC path's pure parts: the mix dealt to the Java load, its out file read back, the
warehouse's ids (the client's message ids) read as the bench's, and `--path` parsed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from coordinator.bench.context import BenchSettings
from coordinator.bench.grpc_driver import cycle, kinds_argument, parse_records
from coordinator.bench.outcomes import first_check_delays_ms, prepared_at_ms, requested_at_ms
from coordinator.bench.report import markdown
from coordinator.bench.runner import GRPC_NOTE, notes, ratios
from coordinator.bench.workload import DEFAULT_MIX, KINDS, Mix
from coordinator.commands.bench import _paths
from delta_tables import check_requests
from tests.coordinator.bench.test_report import _path, sample_result

RUN = "b20250101T000000Z-grpc"


@pytest.mark.parametrize("mix", [DEFAULT_MIX, "commit=3,rollback=1", "checked-commit=7"])
def test_the_cycle_repeated_deals_what_the_python_loads_deal(mix: str) -> None:
    period = cycle(mix)
    dealt = [kind.code for kind in islice(Mix.parse(mix).kinds(), 3 * len(period) + 7)]
    assert dealt == (period * (len(dealt) // len(period) + 1))[: len(dealt)]


def test_the_cycle_is_one_period_of_the_reduced_weights() -> None:
    assert len(cycle(DEFAULT_MIX)) == 50  # 80,10,4,4,2: gcd 2
    assert cycle("commit=40,rollback=20") == cycle("commit=2,rollback=1") == ["c", "r", "c"]


def test_the_kinds_argument_carries_every_kind() -> None:
    parsed = {
        code: tuple(rest.split(":"))
        for code, _, rest in (item.partition("=") for item in kinds_argument().split(";"))
    }
    assert parsed == {
        k.code: (k.name, k.first_op, k.check_answer, str(k.decided_at_check))
        for k in KINDS.values()
    }


def test_the_out_file_reads_as_the_python_loads_results() -> None:
    lines = [
        f"tx\t{RUN}-000000000-c\tM0\t1000\t1012\t1020\n",
        f"tx\t{RUN}-000000001-rc\tM1\t1001\t1011\t-1\n",
        f"tx\t{RUN}-000000002-cr\tM2\t1002\t1010\t-1\n",
        f"check\t{RUN}-000000001-rc\t1\t4000\tUNKNOWN\n",
        f"check\t{RUN}-000000002-cr\t1\t4001\tROLLBACK\n",
        f"check\t{RUN}-000000001-rc\t2\t9000\tCOMMIT\n",
        f"check\t{RUN}-000000001-rc\t3\t9500\tCOMMIT\n",  # asked again: the first answer counts
        f"check\t{RUN}-000000000-c\t1\t9600\tCOMMIT\n",  # a commit kind: unexpected
    ]
    result = parse_records(lines)
    assert result["transactions"] == [
        [f"{RUN}-000000000-c", "commit", 1012, 1020],
        [f"{RUN}-000000001-rc", "rechecked-commit", 1011, None],
        [f"{RUN}-000000002-cr", "checked-rollback", 1010, None],
    ]
    assert result["ids"] == {f"M{i}": key for i, (key, *_) in enumerate(result["transactions"])}
    responder = result["responder"]
    assert responder["answers"] == {
        f"{RUN}-000000001-rc": ["COMMIT", 9000],
        f"{RUN}-000000002-cr": ["ROLLBACK", 4001],
        f"{RUN}-000000000-c": ["COMMIT", 9600],  # as the Python responder (judged: checked)
    }
    assert responder["first_checks"] == {
        f"{RUN}-000000001-rc": [4000, None, None],
        f"{RUN}-000000002-cr": [4001, None, None],
        f"{RUN}-000000000-c": [9600, None, None],
    }
    assert [f"{RUN}-000000001-rc", 2, 9000, None] in responder["arrivals"]
    assert responder["checks_received"] == 5 and responder["unexpected_checks"] == 1
    latency = result["client_latency_ms"]
    assert latency["send"]["count"] == 3 and latency["send"]["max"] == 12.0
    assert latency["end"]["count"] == 1 and latency["end"]["p50"] == 8.0


def test_the_warehouse_s_message_ids_are_read_as_the_bench_s(tmp_path: Path) -> None:
    def at(ms: int) -> datetime:
        return datetime(2025, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)

    stamp = pa.timestamp("us", tz="UTC")
    rows = [("M1", 1, 2_300), ("M1", 2, 7_400), ("OTHER", 1, 2_100)]
    table = pa.table(
        {
            "transaction_id": [tx for tx, _, _ in rows],
            "check_number": pa.array([n for _, n, _ in rows], pa.int32()),
            "prepared_at": pa.array([at(0) for _ in rows], stamp),
            "requested_at": pa.array([at(ms) for _, _, ms in rows], stamp),
        }
    )
    write_deltalake(check_requests.TABLE.path(str(tmp_path)), table, mode="append")
    ids = {"M1": f"{RUN}-000000001-rc", "M9": f"{RUN}-000000009-cc"}
    base = int(at(0).timestamp() * 1000)
    key = ids["M1"]
    assert requested_at_ms(str(tmp_path), ids) == {(key, 1): base + 2_300, (key, 2): base + 7_400}
    assert prepared_at_ms(str(tmp_path), ids) == {key: base}
    assert first_check_delays_ms(str(tmp_path), ids, 2_000) == [300.0]


def test_path_options_expand_in_order() -> None:
    assert _paths(("both",)) == ("kafka", "rest")
    assert _paths(("all",)) == ("kafka", "rest", "grpc")
    assert _paths(("grpc", "kafka", "grpc")) == ("grpc", "kafka")
    assert BenchSettings(paths=("grpc",)).paths == ("grpc",)
    with pytest.raises(ValueError, match="paths must be some of kafka, rest, grpc"):
        BenchSettings(paths=("kafka", "amqp"))


def test_the_report_shows_the_grpc_path_beside_the_others() -> None:
    result = sample_result()
    grpc = _path("grpc")
    grpc["senders"] = 32
    grpc["client_latency_ms"] = parse_records([f"tx\t{RUN}-000000000-c\tM0\t1000\t1012\t1020\n"])[
        "client_latency_ms"
    ]
    result["paths"]["grpc"] = grpc
    result["settings"]["paths"] = ["kafka", "rest", "grpc"]
    result["ratios"] = ratios(result)
    assert result["ratios"]["grpc"]["ours_over_java_short"] == 5.01  # 250.5 / 50
    text = markdown(result, None)
    assert "| grpc | 10 | 0 | 0 | 10 | 400.0 | **250.5** |" in text
    assert (
        "grpc path, RocketMQ's Java client (32 sender threads, one transaction each at a time): "
        "send() ms p50 / p95 / p99 12 / 12 / 12; commit()/rollback() ms p50 / p95 / p99 8 / 8 / 8."
    ) in text
    assert GRPC_NOTE in notes(result)
    assert GRPC_NOTE not in notes(sample_result())  # kafka and rest only
