"""Later checks: the responder answers a rechecked transaction UNKNOWN then COMMIT, and the
bench measures how late each check n >= 2 came after check n-1 + transaction_check_interval."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pyarrow as pa
from deltalake import write_deltalake

from coordinator.bench.context import PhaseContext
from coordinator.bench.outcomes import later_check_delays_ms, requested_at_ms
from coordinator.bench.responder import BenchListener, Responder
from coordinator.bench.throughput import later_check_timeliness
from coordinator.sdk import CheckRequest, LocalTransactionState, OpReceipt, SdkError
from coordinator.sdk.memory_transport import InMemoryTransport
from delta_tables import check_requests

RUN = "b20250101T000000Z-kafka"
RECHECKED = f"{RUN}-000000001-rc"
CHECKED = f"{RUN}-000000002-cc"


def _check(transaction_id: str, number: int, requested_at_ms: int | None = None) -> CheckRequest:
    return CheckRequest(
        transaction_id=transaction_id,
        msg_id="M",
        producer_group="bench-kafka",
        topic="BenchKafka",
        queue_id=0,
        body=b"",
        keys=(),
        tags=None,
        properties={},
        check_number=number,
        prepared_at_ms=1_000,
        requested_at_ms=requested_at_ms,
        source=("checks", 0, number),
    )


class BatchingMemoryTransport(InMemoryTransport):
    """The in-memory transport with `send_ops`, as the bench's Kafka and REST transports."""

    def send_ops(self, ops: Sequence[tuple[str, str, bool]]) -> list[OpReceipt | SdkError]:
        """Store each op in turn."""
        return [self.send_op(*op) for op in ops]


def test_the_listener_answers_unknown_until_the_deciding_check() -> None:
    listener = BenchListener()
    answers = [
        listener.check_local_transaction(_check(tx, n, 5_000 * n))
        for tx, n in ((RECHECKED, 1), (RECHECKED, 2), (CHECKED, 1))
    ]
    assert answers == [
        LocalTransactionState.UNKNOWN,
        LocalTransactionState.COMMIT_MESSAGE,
        LocalTransactionState.COMMIT_MESSAGE,
    ]
    assert listener.unexpected == []  # a rechecked transaction's second check is expected
    assert set(listener.first_checks) == {RECHECKED, CHECKED}
    assert {key: requested for key, (_, requested) in listener.arrivals.items()} == {
        (RECHECKED, 1): 5_000, (RECHECKED, 2): 10_000, (CHECKED, 1): 5_000,
    }  # fmt: skip


def test_a_check_of_a_kind_decided_at_once_is_unexpected() -> None:
    listener = BenchListener()
    answer = listener.check_local_transaction(_check(f"{RUN}-000000003-c", 1))
    assert answer is LocalTransactionState.COMMIT_MESSAGE
    assert listener.unexpected == [f"{RUN}-000000003-c"]


def test_the_responder_times_the_deciding_answer_not_the_unknown() -> None:
    inner = BatchingMemoryTransport()
    responder = Responder(inner, "bench-kafka", workers=1).start()
    try:
        inner.add_checks([_check(RECHECKED, 1, 5_000)])
        _wait_for(lambda: len(inner.ops) == 1)
        inner.add_checks([_check(RECHECKED, 2, 10_000)])
        _wait_for(lambda: len(inner.ops) == 2)
    finally:
        responder.stop()
    assert inner.ops == [(RECHECKED, "UNKNOWN", True), (RECHECKED, "COMMIT", True)]
    results = responder.results()
    assert results["answers"][RECHECKED][0] == "COMMIT"
    assert [row[:2] for row in results["arrivals"]] == [[RECHECKED, 1], [RECHECKED, 2]]
    assert [row[3] for row in results["arrivals"]] == [5_000, 10_000]
    assert results["checks_received"] == 2
    assert results["unexpected_checks"] == 0


def _wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the responder did not answer in time"
        time.sleep(0.01)


def test_a_later_check_is_late_by_its_gap_after_the_previous_one_less_the_interval() -> None:
    requested = {("a", 1): 10_000, ("a", 2): 15_300, ("a", 3): 20_600, ("b", 1): 11_000}
    # b's first check has no previous one; a's checks 2 and 3 are 300 ms late each.
    assert later_check_delays_ms(requested, requested, 5_000) == [300.0, 300.0]
    received = {("a", 2): 15_450, ("c", 2): 30_000}  # c's check 1 is unknown: skipped
    assert later_check_delays_ms(received, requested, 5_000) == [450.0]


def _write_check_rows(warehouse: Path, rows: list[tuple[str, int, int]]) -> None:
    def at(ms: int) -> datetime:
        return datetime(2025, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)

    stamp = pa.timestamp("us", tz="UTC")
    table = pa.table(
        {
            "transaction_id": [tx for tx, _, _ in rows],
            "check_number": pa.array([n for _, n, _ in rows], pa.int32()),
            "prepared_at": pa.array([at(0) for _ in rows], stamp),
            "requested_at": pa.array([at(ms) for _, _, ms in rows], stamp),
        }
    )
    write_deltalake(check_requests.TABLE.path(str(warehouse)), table, mode="append")


def test_the_phase_reports_later_checks_as_recorded_and_as_received(tmp_path: Path) -> None:
    # Check 2 recorded 400 ms after check 1 + 5 s; a replayed batch wrote check 1 twice.
    _write_check_rows(
        tmp_path,
        [
            (RECHECKED, 1, 2_000),
            (RECHECKED, 1, 2_500),
            (RECHECKED, 2, 7_400),
            (CHECKED, 1, 2_100),
            ("another-run-000000001-rc", 2, 99_000),
        ],
    )
    base = int(datetime(2025, 1, 1, tzinfo=UTC).timestamp() * 1000)
    assert requested_at_ms(str(tmp_path), f"{RUN}-") == {
        (RECHECKED, 1): base + 2_000, (RECHECKED, 2): base + 7_400, (CHECKED, 1): base + 2_100,
    }  # fmt: skip
    config = SimpleNamespace(
        warehouse=str(tmp_path), transaction_check_interval=timedelta(seconds=5)
    )
    context = cast(PhaseContext, SimpleNamespace(config=config))
    # The producer received check 2 650 ms after it was due (its copy of check 1's requested_at).
    arrivals = [[RECHECKED, 1, base + 2_050, base + 2_000], [RECHECKED, 2, base + 7_650, None]]
    later = later_check_timeliness(context, RUN, {"arrivals": arrivals})
    assert later["recorded"]["count"] == 1 and later["recorded"]["p50"] == 400.0
    assert later["received_by_producer"]["count"] == 1
    assert later["received_by_producer"]["max"] == 650.0


def test_a_phase_without_checks_reports_empty_summaries(tmp_path: Path) -> None:
    config = SimpleNamespace(
        warehouse=str(tmp_path), transaction_check_interval=timedelta(seconds=5)
    )
    later = later_check_timeliness(cast(PhaseContext, SimpleNamespace(config=config)), RUN, {})
    assert later["recorded"]["count"] == later["received_by_producer"]["count"] == 0
