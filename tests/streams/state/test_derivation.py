"""The state derived from the warehouse is the state the stage holds (pure, property-based).

Random histories of one transaction (tests/streams/stage/test_lifecycle_twin.py's: halves and ops
in batches, in any order, duplicates, operators' RESUMEs, timers, with the watermark and
the batch time moving as in the stream) run through the reference model
(tests/reference/lifecycle.py). Every row the model emits becomes the warehouse row the
writer would append, in the batch it was emitted; streams/state/derivation.py then derives
the state from those rows alone, and must find what the model holds: the same state, half,
check count, deciding op, ops waiting and ops judged, and a timer that is the model's, or,
for a decided transaction (whose decision time the warehouse records as the batch's), at
most one batch later.
"""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, assume, given, settings

from streams.stage.lifecycle import Rules
from streams.state.derivation import (
    CHECK,
    DELIVERY,
    FINAL,
    HALF,
    OP,
    VERDICT,
    derive,
)
from tests.reference.lifecycle import (
    Emit,
    Half,
    Op,
    Step,
    TxState,
    is_resolved,
    on_input,
    on_timer,
    resolved_memory,
)
from tests.streams.stage.test_lifecycle_twin import S, due, histories, rule_sets, state_json

#: How much later than the model a derived decided timer may be: the batch time is at most
#: this much ahead of the watermark in the drawn histories; a discard is counted from the
#: latest store time of its batch's ops, which the drawn ops put up to 15 s ahead.
BATCH_AHEAD_MS = 4 * S
DISCARD_AHEAD_MS = 20 * S
FINAL_STATES = ("COMMITTED", "ROLLED_BACK", "DISCARDED")


def realistic(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Make a drawn history one the ingress can produce: an op id or a message id seen again
    is the same record sent again, a half or an op landed later is not stored earlier
    than one landed before (a transaction's records share a partition, whose store time
    grows), and each batch's time is later than the one before."""
    sent: dict[str, dict[str, Any]] = {"halves": {}, "ops": {}}
    latest = {"halves": 0, "ops": 0}
    out: list[dict[str, Any]] = []
    for drawn in steps:
        # A batch's time only grows, and is never behind the watermark.
        step = {**drawn, "wall": max(drawn["wall"], out[-1]["wall"] + 1 if out else 0)}
        if step["kind"] == "input":
            for side, key in (("halves", "msg_id"), ("ops", "op_id")):
                seen, floor = sent[side], latest[side] + 1 if sent[side] else 0
                step[side] = [
                    seen.setdefault(getattr(r, key), replace(r, stored_ms=max(r.stored_ms, floor)))
                    for r in step[side]
                ]
                latest[side] = max([latest[side], *(r.stored_ms for r in step[side])])
        out.append(step)
    return out


def half_row(half: Half) -> dict[str, Any]:
    return {
        "source": HALF, "transaction_id": half.transaction_id, "msg_id": half.msg_id,
        "producer_group": half.producer_group, "topic": half.topic,
        "queue_id": half.queue_id, "body": half.body, "keys": list(half.keys),
        "tags": half.tags, "properties": dict(half.properties),
        "check_immunity_seconds": half.check_immunity_seconds, "stored_ms": half.stored_ms,
    }  # fmt: skip


def op_row(op: Op) -> dict[str, Any]:
    return {"source": OP, **{name: getattr(op, name) for name in Op.__dataclass_fields__}}


def emitted_row(emit: Emit, batch: int) -> dict[str, Any]:
    """The warehouse row the writer appends for `emit` (none for a DISCARD's own table)."""
    at = {"at_ms": emit.at_ms, "batch_id": batch}
    kind = emit.kind.value
    if kind == "CHECK":
        return {"source": CHECK, "check_number": emit.check_number, **at}
    if kind == "FINAL":
        assert emit.state is not None
        return {
            "source": FINAL, "state": emit.state.name, "check_count": emit.check_count,
            "deciding_op_id": emit.deciding_op_id, **at,
        }  # fmt: skip
    if kind == "DELIVER":
        assert emit.op is not None
        return {"source": DELIVERY, "op_id": emit.op.op_id, **at}
    assert kind == "VERDICT" and emit.op is not None
    return {
        "source": VERDICT, "op_id": emit.op.op_id, "op": emit.op.op, "verdict": emit.verdict,
        "detail": emit.detail, "stored_ms": emit.op.stored_ms, **at,
    }  # fmt: skip


def run(steps: list[dict[str, Any]], rules: Rules) -> tuple[TxState | None, list[Any], bool]:
    """Run a history through the model; return its last state, the warehouse rows, and
    whether the transaction was forgotten and then began anew (an id used again)."""
    state: TxState | None = None
    rows: list[dict[str, Any]] = []
    reborn = forgotten = False
    for batch, step in enumerate(steps):
        result = Step(state)
        if step["kind"] == "input":
            rows += [half_row(h) for h in step["halves"]] + [op_row(o) for o in step["ops"]]
            result = on_input(
                state, step["halves"], step["ops"], step["now"], rules, wall_ms=step["wall"]
            )
        elif step["kind"] == "timer" and state is not None and due(state, step["now"]):
            result = on_timer(state, step["now"], rules, wall_ms=step["wall"])
        rows += [emitted_row(e, batch) for e in result.emits if e.kind.value != "DISCARD"]
        # Forgotten: it had a state, or was decided or given up in this very step (a half
        # that came expired, ops that came after their wait for a half), and keeps none.
        had = state is not None or any(
            e.kind.value == "FINAL" or e.verdict == "ORPHAN" for e in result.emits
        )
        state = result.state
        forgotten = forgotten or (had and state is None)
        reborn = reborn or (forgotten and state is not None)
    return state, rows, reborn


def logically(state: TxState | None, now: int) -> TxState | None:
    """The model's state as the stage holds it now: a decided one whose forgetting is due
    is gone (the model forgets it at its next timer or input), and a resolved one keeps no
    message (TransactionProcessor keeps `resolved_memory`)."""
    if state is None or state.state is None or state.state.name not in FINAL_STATES:
        return state
    if state.timer_ms is not None and state.timer_ms <= now:
        return None
    return resolved_memory(state) if is_resolved(state) else state


def ahead(derived: dict[str, Any]) -> int:
    return DISCARD_AHEAD_MS if derived["state"] == "DISCARDED" else BATCH_AHEAD_MS


def as_row(expected: dict[str, Any]) -> dict[str, Any]:
    """The model's state (the twin test's JSON) in the derivation's row layout."""
    half = expected["half"]
    if half is not None:
        half = {
            **half,
            "body": base64.b64decode(half["body"]),
            "properties": [{"key": k, "value": v} for k, v in half["properties"]],
        }
    return {**expected, "half": half}


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=histories(), rules=rule_sets())
def test_the_state_derived_from_the_warehouse_is_the_stages(
    steps: list[dict[str, Any]], rules: Rules
) -> None:
    steps = realistic(steps)
    state, rows, reborn = run(steps, rules)
    assume(not reborn)  # a transaction id used again after it was forgotten: not derived
    now = steps[-1]["now"]
    held = logically(state, now)
    derived = derive(rows, rules, now)
    if held is None:
        # Only a decided one the stage forgot up to a batch before the derivation would.
        assert derived is None or (
            derived["state"] in FINAL_STATES and derived["timer_ms"] - now <= ahead(derived)
        ), derived
        return
    assert derived is not None, repr((held, rows))
    expected = as_row(state_json(held) or {})
    decided = expected["state"] in FINAL_STATES
    timer, derived_timer = expected.pop("timer_ms"), derived.pop("timer_ms")
    assert derived == expected, repr((derived, expected, rows))
    if decided:
        assert 0 <= derived_timer - timer <= ahead(derived), (derived_timer, timer)
    else:
        assert derived_timer == timer, repr((derived_timer, timer, rows))


def test_of_two_discards_in_one_batch_the_one_after_the_resume_holds() -> None:
    """Found by the property above: a half given up (discarded after one check), an
    operator's RESUME and a late COMMIT in one batch. The RESUME restarts the checks, the
    batch's timer discards it again at once: the second discard, with no check, holds (the
    rows may come in any order from the tables)."""
    rules = Rules(
        timeout_ms=1000,
        check_interval_ms=1000,
        check_max=1,
        file_reserved_ms=11000,
        resolved_retention_ms=5000,
        orphan_wait_ms=2000,
        max_check_immunity_ms=1000,
    )
    t = 1_800_000_000_000
    half = {"source": HALF, "transaction_id": "tx-1", "msg_id": "m-0", "producer_group": "g"}
    half |= {"topic": "T", "queue_id": 0, "body": b"", "keys": [], "tags": None}
    half |= {"properties": {}, "check_immunity_seconds": None, "stored_ms": t}
    op = {"source": OP, "transaction_id": "tx-1", "producer_group": "g", "from_check": False}
    verdict = {"source": VERDICT, "detail": None, "at_ms": t + 12000, "batch_id": 4}
    final = {"source": FINAL, "state": "DISCARDED", "deciding_op_id": None}
    final |= {"at_ms": t + 12000, "batch_id": 4}
    rows = [
        half,
        {"source": CHECK, "check_number": 1, "at_ms": t + 1000, "batch_id": 3},
        {**op, "op_id": "op-0", "op": "COMMIT", "operator": None, "reason": None}
        | {"stored_ms": t + 12001},
        {**op, "op_id": "op-1", "op": "RESUME", "operator": "alice", "reason": "why"}
        | {"stored_ms": t + 12000},
        {**final, "check_count": 1},
        {**verdict, "op_id": "op-1", "op": "RESUME", "verdict": "APPLIED", "stored_ms": t + 12000},
        {**final, "check_count": 0},
        {**verdict, "op_id": "op-0", "op": "COMMIT", "verdict": "LATE", "stored_ms": t + 12001},
    ]
    for order in (rows, rows[::-1]):
        derived = derive(order, rules, t + 12000)
        assert derived is not None
        assert (derived["state"], derived["check_count"]) == ("DISCARDED", 0), derived
