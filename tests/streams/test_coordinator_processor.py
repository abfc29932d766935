"""Where the stateful stage keeps a transaction, and which timers it holds (pyspark's TwsTester).

Pure unit logic: TwsTester runs the processor against in-memory state and timers, without
Spark. That Spark's TTL really forgets resolved transactions is tested end to end in
tests/streams/test_retention.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

from coordinator.state_machine import TransactionState
from streams.coordinator_processor import (
    INPUT_SCHEMA,
    TransactionProcessor,
    decode_state,
    encode_state,
)
from streams.lifecycle import Rules, TxState
from tests.streams.test_lifecycle import RULES, T0, S, half

HALF = {
    "h_msg_id": "m-1", "h_producer_group": "orders", "h_topic": "OrderPaid", "h_queue_id": 1,
    "h_body": b"the body", "h_keys": ["k"], "h_tags": None, "h_properties": {"a": "b"},
    "h_check_immunity_seconds": None, "h_stored_ms": T0,
}  # fmt: skip


#: The stage's grouping key (producer group, transaction id) of the transaction under test.
#: TwsTester models one key column and hands the processor `(key,)`; the processor only
#: compares its key with the heartbeat id, so the nesting does not matter to it.
TX = ("orders", "tx")


def row(
    half: bool = False, op: str | None = None, op_id: str = "op-1", at: int = T0,
    group: str = "orders", **half_fields: Any,
) -> Row:  # fmt: skip
    values: dict[str, Any] = dict.fromkeys(INPUT_SCHEMA.fieldNames())
    values.update(producer_group=group, transaction_id="tx")
    if half:
        values.update(HALF, h_producer_group=group, **half_fields)
    if op is not None:
        values.update(o_op_id=op_id, o_producer_group=group, o_op=op, o_from_check=False,
                      o_stored_ms=at)  # fmt: skip
    return Row(**values)


def stage(now_ms: int, rules: Rules = RULES) -> TwsTester:
    tws = TwsTester(TransactionProcessor(rules), timeMode="ProcessingTime")
    tws.setProcessingTime(now_ms)
    return tws


def timers(tws: TwsTester, key: tuple[str, str] = TX) -> list[int]:
    tws.handle.setGroupingKey(key)
    return list(tws.handle.listTimers())


def stored(tws: TwsTester, variable: str, key: tuple[str, str] = TX) -> TxState | None:
    value = tws.peekValueState(variable, key)
    return decode_state(value[0]) if value else None


def kinds(rows: list[Row]) -> list[str]:
    return [r["kind"] for r in rows]


def test_a_decided_transaction_is_kept_resolved_without_body_or_timer() -> None:
    tws = stage(T0 + 2 * S)
    out = tws.test(TX, [row(half=True, op="COMMIT", at=T0 + S), row(op="COMMIT", at=T0 + S)])
    assert kinds(out) == ["VERDICT", "DELIVER", "FINAL"]
    assert [r["body"] for r in out if r["kind"] == "DELIVER"] == [b"the body"]
    assert stored(tws, "transaction") is None
    kept = stored(tws, "resolved")
    assert kept is not None and kept.state is TransactionState.COMMITTED
    assert kept.half is not None and kept.half.body == b"" and kept.timer_ms is None
    assert timers(tws) == []
    # A later op is judged from that memory, and an unchanged memory is not rewritten.
    out = tws.test(TX, [row(op="ROLLBACK", op_id="op-2", at=T0 + 5 * S)])
    assert [(r["kind"], r["verdict"]) for r in out] == [("VERDICT", "CONFLICT")]
    again = tws.test(TX, [row(op="ROLLBACK", op_id="op-2", at=T0 + 5 * S)])
    assert again == [] and stored(tws, "resolved") is not None


def test_a_live_transaction_keeps_its_check_timer_until_decided() -> None:
    tws = stage(T0 + S)
    assert tws.test(TX, [row(half=True)]) == []
    live = stored(tws, "transaction")
    assert live is not None and live.state is TransactionState.PREPARED
    assert live.half is not None and live.half.body == b"the body"
    assert timers(tws) == [T0 + RULES.timeout_ms]
    checks = tws.setProcessingTime(T0 + RULES.timeout_ms)
    assert [(r["kind"], r["check_number"]) for r in checks] == [("CHECK", 1)]
    assert timers(tws) == [T0 + RULES.timeout_ms + RULES.check_interval_ms]
    out = tws.test(TX, [row(op="COMMIT", at=T0 + 7 * S)])
    assert kinds(out) == ["VERDICT", "DELIVER", "FINAL"]
    assert stored(tws, "transaction") is None and stored(tws, "resolved") is not None
    assert timers(tws) == []


def test_a_resolved_transaction_from_a_timer_era_checkpoint_moves_to_the_resolved_variable() -> (
    None
):
    """Earlier versions kept it live with a retention timer: it still works, then moves."""
    forget_at = T0 + RULES.resolved_retention_ms
    old = TxState(TransactionState.COMMITTED, half(), 0, "op-1", (), forget_at, ("op-1",))
    tws = stage(T0 + 3 * S)
    tws.updateValueState("transaction", TX, (encode_state(old),))
    tws.handle.setGroupingKey(TX)
    tws.handle.registerTimer(forget_at)
    out = tws.test(TX, [row(op="COMMIT", op_id="op-2", at=T0 + 3 * S)])
    assert [(r["kind"], r["verdict"]) for r in out] == [("VERDICT", "DUPLICATE")]
    assert stored(tws, "transaction") is None
    assert stored(tws, "resolved") is not None
    assert timers(tws) == []


def test_two_groups_with_the_same_id_are_two_transactions() -> None:
    """SPEC 3: (group, id) identifies a transaction; nothing one group sends touches another."""
    payments = ("payments", "tx")
    tws = stage(T0 + S)
    assert tws.test(TX, [row(half=True)]) == []
    assert tws.test(payments, [row(half=True, group="payments")]) == []
    out = tws.test(payments, [row(op="COMMIT", at=T0 + 2 * S, group="payments")])
    assert kinds(out) == ["VERDICT", "DELIVER", "FINAL"]
    assert {r["producer_group"] for r in out if r["kind"] != "VERDICT"} == {"payments"}
    assert stored(tws, "resolved", payments) is not None
    live = stored(tws, "transaction")
    assert live is not None and live.state is TransactionState.PREPARED
    assert timers(tws) == [T0 + RULES.timeout_ms]
    checks = tws.setProcessingTime(T0 + RULES.timeout_ms)
    assert [(r["kind"], r["producer_group"]) for r in checks] == [("CHECK", "orders")]


def test_expiry_fires_on_time_when_the_check_interval_is_longer() -> None:
    """SPEC 4: the one timer is min(next check, stored + file_reserved_time)."""
    rules = replace(RULES, file_reserved_ms=60 * S, check_interval_ms=3600 * S)
    tws = stage(T0 + 14 * S, rules)
    assert kinds(tws.test(TX, [row(half=True)])) == ["CHECK"]
    assert timers(tws) == [T0 + 60 * S]
    gone = tws.setProcessingTime(T0 + 60 * S)
    expired = [("DISCARD", "expired"), ("FINAL", "expired")]
    assert [(r["kind"], r["reason"]) for r in gone] == expired
    # A tombstone lasts until the half is older than file_reserved_time: already the case.
    assert timers(tws) == [] and stored(tws, "transaction") is None


def test_a_huge_immunity_is_clamped_to_the_maximum() -> None:
    tws = stage(T0 + 14 * S)
    assert tws.test(TX, [row(half=True, h_check_immunity_seconds=2_147_483_647)]) == []
    assert timers(tws) == [T0 + RULES.max_check_immunity_ms]
    checks = tws.setProcessingTime(T0 + RULES.max_check_immunity_ms)
    assert [(r["kind"], r["check_number"]) for r in checks] == [("CHECK", 1)]
