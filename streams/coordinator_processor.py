"""The stateful stage of the coordinator: Spark's transformWithState around `lifecycle`.

Keyed by (producer group, transaction id), the identity of a transaction (SPEC 3), in
processing time (its timers fire with no new input, so checks
go out in a quiet system). This module only converts: Spark rows to `lifecycle` values,
the state to and from one JSON value, the one timer of a transaction to and from Spark's
timer API, and emitted values back to rows. All decisions live in streams/lifecycle.py.

Times cross the boundary as epoch milliseconds (long columns), never as Python datetimes,
so no time zone can creep in between the JVM and this process.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import asdict, replace
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
    ValueState,
)
from pyspark.sql.types import (
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from coordinator.state_machine import TransactionState
from delta_tables.columns import MESSAGE
from delta_tables.half_messages import HEARTBEAT_ID
from streams.lifecycle import (
    Emit,
    Half,
    Op,
    Rules,
    Step,
    TxState,
    is_resolved,
    on_input,
    on_timer,
    resolved_memory,
)

#: The grouping key of the stage: what identifies a transaction (SPEC 3). A checkpoint of an
#: earlier version, keyed by transaction id alone, cannot be resumed (streams/coordinator_job.py).
KEY = ("producer_group", "transaction_id")

#: What the stage receives: a half (matched, or given up on by the join), an op, or both.
INPUT_SCHEMA = StructType(
    [
        *[StructField(key, StringType()) for key in KEY],
        # the half: h_<column of the half message>, its store time in milliseconds
        *[StructField(f"h_{f.name}", f.dataType) for f in MESSAGE[1:]],
        StructField("h_check_immunity_seconds", IntegerType()),
        StructField("h_stored_ms", LongType()),
        # the op: o_<column of the op record>
        StructField("o_op_id", StringType()),
        StructField("o_producer_group", StringType()),
        StructField("o_op", StringType()),
        StructField("o_from_check", BooleanType()),
        StructField("o_operator", StringType()),
        StructField("o_reason", StringType()),
        StructField("o_stored_ms", LongType()),
    ]
)

#: What the stage emits; `kind` says which fields matter (see lifecycle.Kind).
OUTPUT_SCHEMA = StructType(
    [
        StructField("kind", StringType()),
        StructField("transaction_id", StringType()),
        StructField("at_ms", LongType()),
        *MESSAGE[1:],
        StructField("check_immunity_seconds", IntegerType()),
        StructField("prepared_ms", LongType()),
        StructField("check_number", IntegerType()),
        StructField("state", StringType()),
        StructField("reason", StringType()),
        StructField("check_count", IntegerType()),
        StructField("deciding_op_id", StringType()),
        StructField("op_id", StringType()),
        StructField("op_producer_group", StringType()),
        StructField("op", StringType()),
        StructField("op_from_check", BooleanType()),
        StructField("op_operator", StringType()),
        StructField("op_reason", StringType()),
        StructField("op_stored_ms", LongType()),
        StructField("verdict", StringType()),
        StructField("detail", StringType()),
    ]
)

STATE_SCHEMA = StructType([StructField("json", StringType())])


# -- rows <-> lifecycle values ---------------------------------------------------------------
def half_of(row: Row) -> Half | None:
    """Return the half carried by an input row, if any."""
    if row["h_msg_id"] is None:
        return None
    # A map column reaches the row API as a dict or as a list of (key, value) pairs.
    properties = row["h_properties"] or {}
    pairs = properties.items() if isinstance(properties, dict) else properties
    return Half(
        transaction_id=row["transaction_id"],
        msg_id=row["h_msg_id"],
        producer_group=row["h_producer_group"],
        topic=row["h_topic"],
        queue_id=row["h_queue_id"],
        body=bytes(row["h_body"] or b""),
        keys=tuple(row["h_keys"] or ()),
        tags=row["h_tags"],
        properties=tuple(sorted((str(k), str(v)) for k, v in pairs)),
        check_immunity_seconds=row["h_check_immunity_seconds"],
        stored_ms=row["h_stored_ms"],
    )


def op_of(row: Row) -> Op | None:
    """Return the op carried by an input row, if any."""
    if row["o_op_id"] is None:
        return None
    return Op(
        op_id=row["o_op_id"],
        transaction_id=row["transaction_id"],
        producer_group=row["o_producer_group"],
        op=row["o_op"],
        from_check=bool(row["o_from_check"]),
        operator=row["o_operator"],
        reason=row["o_reason"],
        stored_ms=row["o_stored_ms"],
    )


def row_of(emit: Emit) -> Row:
    """Return the output row of one emitted value."""
    half, op = emit.half, emit.op
    values: dict[str, Any] = dict.fromkeys(OUTPUT_SCHEMA.fieldNames())
    values.update(kind=emit.kind.value, transaction_id=emit.transaction_id, at_ms=emit.at_ms)
    if half is not None:
        values.update(
            msg_id=half.msg_id, producer_group=half.producer_group, topic=half.topic,
            queue_id=half.queue_id, body=half.body, keys=list(half.keys), tags=half.tags,
            properties=dict(half.properties),
            check_immunity_seconds=half.check_immunity_seconds, prepared_ms=half.stored_ms,
        )  # fmt: skip
    if op is not None:
        values.update(
            op_id=op.op_id, op_producer_group=op.producer_group, op=op.op,
            op_from_check=op.from_check, op_operator=op.operator, op_reason=op.reason,
            op_stored_ms=op.stored_ms,
        )  # fmt: skip
    values.update(
        check_number=emit.check_number,
        state=emit.state.name if emit.state is not None else None,
        reason=emit.reason, check_count=emit.check_count, deciding_op_id=emit.deciding_op_id,
        verdict=emit.verdict, detail=emit.detail,
    )  # fmt: skip
    return Row(**values)


# -- state <-> JSON ------------------------------------------------------------------------
def encode_state(state: TxState) -> str:
    """Return `state` as JSON (the body as base64)."""
    raw = asdict(state)
    raw["state"] = state.state.name if state.state is not None else None
    if state.half is not None:
        raw["half"]["body"] = base64.b64encode(state.half.body).decode()
    return json.dumps(raw, separators=(",", ":"))


def decode_state(text: str) -> TxState:
    """Return the TxState that `encode_state` wrote."""
    raw = json.loads(text)
    half = raw["half"]
    if half is not None:
        half = Half(
            **{**half, "body": base64.b64decode(half["body"]), "keys": tuple(half["keys"]),
               "properties": tuple(tuple(p) for p in half["properties"])}
        )  # fmt: skip
    return TxState(
        state=TransactionState[raw["state"]] if raw["state"] else None,
        half=half,
        check_count=raw["check_count"],
        deciding_op_id=raw["deciding_op_id"],
        pending_ops=tuple(Op(**op) for op in raw["pending_ops"]),
        timer_ms=raw["timer_ms"],
        judged_ops=tuple(raw.get("judged_ops", ())),
    )


class TransactionProcessor(StatefulProcessor):
    """transformWithState processor: one `lifecycle` transaction per grouping key.

    Two state variables hold a transaction, never both at once:

    - `transaction`: a live one (waiting for its half, a decision, a check or an operator),
      with its one processing-time timer; no expiry, however long the engine was stopped;
    - `resolved`: a committed or rolled-back one, as `lifecycle.resolved_memory`, forgotten
      by Spark's TTL `resolved_retention` after its last change. A timer would cost a
      registration now and, when it fires, a state-server round trip per call to load,
      clear and delete it: more than the decision itself. A TTL expires in the JVM alone.

    Every state call is a round trip to the JVM, so the processor makes as few as it can:
    `get` without `exists` (an absent value reads as None), and no write of an unchanged
    state.
    """

    def __init__(self, rules: Rules) -> None:
        self.rules = rules

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Declare the state variables: live and resolved transactions, as JSON."""
        self.handle = handle
        self.live = handle.getValueState("transaction", STATE_SCHEMA)
        self.resolved = handle.getValueState(
            "resolved", STATE_SCHEMA, ttlDurationMs=self.rules.resolved_retention_ms
        )

    def _load(self) -> tuple[TxState | None, ValueState | None]:
        """Return the transaction's state and the variable that holds it (None: neither)."""
        for variable in (self.live, self.resolved):
            stored = variable.get()
            if stored:
                return decode_state(stored[0]), variable
        return None, None

    def _save(
        self, before: TxState | None, held_in: ValueState | None, step: Step
    ) -> Iterator[Row]:
        """Persist the new state, move the timer, and return the rows to emit."""
        after = step.state
        if after is not None and is_resolved(after):
            after = replace(resolved_memory(after), timer_ms=None)  # the TTL forgets it
        old_timer = before.timer_ms if before is not None else None
        new_timer = after.timer_ms if after is not None else None
        if old_timer is not None and old_timer != new_timer:
            self.handle.deleteTimer(old_timer)
        if new_timer is not None and new_timer != old_timer:
            self.handle.registerTimer(new_timer)
        target = self._home(after)
        if held_in is not None and held_in is not target:
            held_in.clear()
        if target is not None and after is not None and (after != before or held_in is not target):
            target.update((encode_state(after),))
        return iter([row_of(emit) for emit in step.emits])

    def _home(self, state: TxState | None) -> ValueState | None:
        """Return the variable that keeps `state` (None: nothing is kept)."""
        if state is None:
            return None
        return self.resolved if is_resolved(state) else self.live

    # Spark's method and argument names (camelCase) are part of the interface.
    def handleInputRows(  # noqa: N802
        self,
        key: Any,
        rows: Iterator[Row],
        timerValues: TimerValues,  # noqa: N803
    ) -> Iterator[Row]:
        """Take this batch's rows for one transaction."""
        if HEARTBEAT_ID in key:  # (no group, HEARTBEAT_ID): heartbeats moved the watermark
            return iter([])
        halves, ops = [], []
        for row in rows:
            if (half := half_of(row)) is not None:
                halves.append(half)
            if (op := op_of(row)) is not None:
                ops.append(op)
        before, held_in = self._load()
        now = timerValues.getCurrentProcessingTimeInMs()
        return self._save(before, held_in, on_input(before, halves, ops, now, self.rules))

    def handleExpiredTimer(  # noqa: N802
        self,
        key: Any,
        timerValues: TimerValues,  # noqa: N803
        expiredTimerInfo: ExpiredTimerInfo,  # noqa: N803
    ) -> Iterator[Row]:
        """Act on the transaction's timer."""
        before, held_in = self._load()
        if before is None or before.timer_ms != expiredTimerInfo.getExpiryTimeInMs():
            return iter([])  # a timer this transaction no longer uses
        # The fired timer is gone: do not delete it again when the state moves on.
        fired = replace(before, timer_ms=None)
        now = timerValues.getCurrentProcessingTimeInMs()
        return self._save(fired, held_in, on_timer(before, now, self.rules))

    def close(self) -> None:
        """Nothing to release."""
